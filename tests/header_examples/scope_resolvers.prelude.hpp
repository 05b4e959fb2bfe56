// Names the example in include/idem/scope_resolvers.hpp uses and does not declare (tests/header_examples.py).
#pragma once

void use(const idem::scope& s);
void reject_unscoped();

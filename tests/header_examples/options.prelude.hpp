// Names the example in include/idem/options.hpp uses and does not declare (tests/header_examples.py).
#pragma once

extern const idem::executor_options reloaded;

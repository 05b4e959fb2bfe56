// Runs a fuzz target without libFuzzer: every file of the given corpus
// directories, then a fixed number of deterministic pseudo-random inputs, so the
// targets run as regression tests in every build.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int run(const std::string& input) {
    return LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t inputs = 0;
    try {
        for (int i = 1; i < argc; ++i) {
            for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
                std::ifstream in(entry.path(), std::ios::binary);
                run(std::string(std::istreambuf_iterator<char>(in), {}));
                ++inputs;
            }
        }
        std::mt19937 random(20261130);
        const std::string alphabet = "\"\\ \t\n\x1f:|-_aZ09\x80\xc3\xa9\xff\x00IDR1";
        for (int n = 0; n < 20000; ++n) {
            std::string input(random() % 64, '\0');
            for (char& c : input)
                c = random() % 4 == 0 ? static_cast<char>(random()) : alphabet[random() % alphabet.size()];
            run(input);
            ++inputs;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz target failed after %zu inputs: %s\n", inputs, e.what());
        return 1;
    }
    std::printf("%zu inputs, no failure\n", inputs);
    return 0;
}

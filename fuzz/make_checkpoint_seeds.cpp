// Writes the checkpoint fuzzer's seed corpus: one real checkpoint of each model in fuzz_models.h,
// saved after a few training steps. Usage: make_checkpoint_seeds OUTPUT_DIR
#include <cstdio>

#include "fuzz_models.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const auto& models = tinyfuse::fuzz::checkpoint_models();
  for (size_t i = 0; i < models.size(); ++i) {
    const auto& f = models[i];
    tinyfuse::Model m = tinyfuse::create_from_config(f.n_input_dims, f.n_output_dims, f.config);
    tinyfuse::fuzz::train_a_little(m, f.n_input_dims, f.n_output_dims, 3);
    const std::string path = std::string(argv[1]) + "/model" + std::to_string(i) + ".safetensors";
    tinyfuse::save_checkpoint(path, m);
    std::printf("%s\n", path.c_str());
  }
  return 0;
}

// Writes the hostile part of the fuzzers' seed corpus (docs/ERRORS.md, "Limits"), generated rather
// than committed because the deep ones are hundreds of kilobytes of brackets: OUT/config/ holds
// configs nested 100,000 deep, 5,000 nested EMA optimizers, Composite encodings 300 deep and with
// 1,100 parts, repeated keys, 1e400, a long non-ASCII otype and a model of 1 G parameters;
// OUT/checkpoint/ a 200 KB deep safetensors header, 200 KB of JSON that is not a checkpoint, and
// a 7 KB checkpoint with valid checksums whose config names a 1 G-parameter model.
// scripts/fuzz.sh runs it before fuzzing. Usage: make_hostile_seeds OUT
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/forged_checkpoint.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
namespace fs = std::filesystem;

namespace {

constexpr const char* kNetwork = R"("network": {"otype": "PortableMLP", "n_neurons": 8, "n_hidden_layers": 1})";

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

// A safetensors file: 8-byte little-endian header length, the header padded to 8, the data.
std::string safetensors_file(std::string header, const std::vector<uint8_t>& data = {}) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header + std::string(data.begin(), data.end());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT\n", argv[0]);
    return 2;
  }
  const fs::path config = fs::path(argv[1]) / "config", checkpoint = fs::path(argv[1]) / "checkpoint";
  fs::create_directories(config);
  fs::create_directories(checkpoint);

  const size_t deep = 100000;
  write(config / "deep_arrays.json", std::string(deep, '[') + std::string(deep, ']'));
  write(config / "deep_objects.json", repeat("{\"a\":", 30000) + "1" + std::string(30000, '}'));
  write(config / "deep_in_network.json",
        "{\"network\": {\"otype\": \"PortableMLP\", \"n_neurons\": " + std::string(deep, '[') + std::string(deep, ']') + "}}");
  write(config / "nested_ema_5000.json",
        "{\"optimizer\": " + repeat("{\"otype\":\"EMA\",\"nested\":", 5000) + "{}" + std::string(5000, '}') + ", " + kNetwork + "}");
  write(config / "nested_ema_17.json",
        "{\"optimizer\": " + repeat("{\"otype\":\"EMA\",\"nested\":", 17) + "{}" + std::string(17, '}') + ", " + kNetwork + "}");
  write(config / "nested_composite_300.json", "{\"encoding\": " + repeat("{\"otype\":\"Composite\",\"nested\":[", 300) +
                                                  "{\"otype\":\"Identity\"}" + repeat("]}", 300) + ", " + kNetwork + "}");
  write(config / "nested_composite_17.json", "{\"encoding\": " + repeat("{\"otype\":\"Composite\",\"nested\":[", 17) +
                                                 "{\"otype\":\"Identity\"}" + repeat("]}", 17) + ", " + kNetwork + "}");
  write(config / "composite_1100_parts.json",
        "{\"encoding\": {\"otype\": \"Composite\", \"nested\": [" + repeat("{\"otype\":\"Identity\",\"n_dims_to_encode\":0},", 1099) +
            "{\"otype\":\"Identity\"}]}, " + kNetwork + "}");
  write(config / "repeated_keys.json", std::string("{") + kNetwork + ", " + kNetwork + "}");
  write(config / "number_1e400.json", std::string("{\"optimizer\": {\"learning_rate\": 1e400}, ") + kNetwork + "}");
  write(config / "non_ascii_otype.json", "{\"network\": {\"otype\": \"" + repeat("\xC3\xA9", 60) + "\"}}");
  write(config / "mlp_1g_params.json", R"({"network": {"otype": "PortableMLP", "n_neurons": 4096, "n_hidden_layers": 64}})");

  write(checkpoint / "deep_header.safetensors", safetensors_file("{\"a\":" + std::string(deep, '[') + std::string(deep, ']') + "}"));
  write(checkpoint / "deep_json_not_a_checkpoint.json", "{\"a\":" + std::string(deep, '[') + std::string(deep, ']') + "}");
  write(checkpoint / "repeated_metadata.safetensors", safetensors_file(R"({"__metadata__": {}, "__metadata__": {}})"));
  using tinyfuse::testing::checkpoint_with_config;
  write(checkpoint / "config_of_1g_params.safetensors",
        checkpoint_with_config(R"({"network": {"otype": "PortableMLP", "n_neurons": 4096, "n_hidden_layers": 64}})", 65));
  write(checkpoint / "deep_config.safetensors",
        checkpoint_with_config(repeat("{\"a\":", 30000) + "1" + std::string(30000, '}'), 65));
  write(checkpoint / "small_model.safetensors",
        checkpoint_with_config(R"({"network": {"otype": "PortableMLP", "n_neurons": 16, "n_hidden_layers": 1}})", 65));
  return 0;
}

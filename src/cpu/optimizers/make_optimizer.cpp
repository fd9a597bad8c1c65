// TEMPORARY: replaced by the optimizer implementation.
#include "cpu/optimizers/optimizers.h"
#include "tinyfuse/errors.h"
namespace tinyfuse::cpu {
std::unique_ptr<Optimizer> make_optimizer(const json&, const std::string&) { throw UnsupportedError("optimizers not built yet"); }
}  // namespace tinyfuse::cpu

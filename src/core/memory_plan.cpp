#include "core/memory_plan.h"

#include "core/gpu_hooks.h"
#include "core/host_memory.h"
#include "tinyfuse/errors.h"

namespace tinyfuse {

void MemoryPlan::add(std::string item, uint64_t count, uint64_t bytes_each, bool on_host) {
  if (count == 0 || bytes_each == 0) return;
  items_.push_back({std::move(item), count, bytes_each, on_host});
}

uint64_t MemoryPlan::sum(bool on_host) const {
  uint64_t total = 0;
  for (const Item& i : items_) {
    if (i.on_host != on_host) continue;
    uint64_t bytes;
    if (__builtin_mul_overflow(i.count, i.bytes_each, &bytes) || __builtin_add_overflow(total, bytes, &total))
      return UINT64_MAX;
  }
  return total;
}

uint64_t MemoryPlan::host_bytes() const { return sum(true); }
uint64_t MemoryPlan::device_bytes() const { return sum(false); }

std::string MemoryPlan::breakdown() const {
  bool mixed = false;
  for (const Item& i : items_) mixed = mixed || i.on_host != items_.front().on_host;
  std::string out;
  for (const Item& i : items_) {
    out += (out.empty() ? "" : ", ") + i.what + " " + std::to_string(i.count) + " x " + std::to_string(i.bytes_each) + " B";
    if (mixed) out += i.on_host ? " (host)" : " (device)";
  }
  return out.empty() ? "nothing" : out;
}

void MemoryPlan::check() const {
  const uint64_t host = host_bytes(), device = device_bytes();
  if (host == UINT64_MAX || device == UINT64_MAX)
    throw OutOfMemoryError(SIZE_MAX, what_, "the size overflows 64 bits: " + breakdown());
  if (host > host_memory_bytes())
    throw OutOfMemoryError(static_cast<size_t>(host), what_,
                           breakdown() + "; this machine has " + std::to_string(host_memory_bytes()) + " bytes of memory");
  // The device's total memory, when it can be read: more than that can never be had.
  const uint64_t device_total = device > 0 ? gpu_hooks().device_memory() : 0;
  if (device_total > 0 && device > device_total)
    throw OutOfMemoryError(static_cast<size_t>(device), what_,
                           breakdown() + "; the GPU has " + std::to_string(device_total) + " bytes of memory");
}

}  // namespace tinyfuse

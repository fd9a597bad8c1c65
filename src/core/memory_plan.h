// What an object will hold in memory, item by item, checked as a whole before any of it is
// allocated: one place for the arithmetic (overflow-checked) and for the message, which names
// every item. The Trainer's plan is built from the objects themselves (its own buffers, the
// optimizer's state through OptimizerBase::plan_memory), so adding a buffer means adding it to
// the plan next to where it is allocated (docs/ERRORS.md, "Out of memory").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tinyfuse {

class MemoryPlan {
 public:
  // `what` names the whole, for messages: "a Trainer of PortableMLP (1061158915 parameters)".
  explicit MemoryPlan(std::string what) : what_(std::move(what)) {}

  // `count` elements of `bytes_each` bytes, in host memory or in the device's.
  void add(std::string item, uint64_t count, uint64_t bytes_each, bool on_host);

  // The sums in bytes; UINT64_MAX when one overflows.
  uint64_t host_bytes() const;
  uint64_t device_bytes() const;
  // "FP32 master parameters 1000 x 4 B, gradients 1000 x 4 B, ..." (host and device items marked).
  std::string breakdown() const;

  // Throws OutOfMemoryError naming every item when a size overflows 64 bits, the host part
  // exceeds this machine's physical memory or the device part the current GPU's total memory.
  // (Memory other work holds is the allocator's to refuse: a failed GPU allocation is an
  // OutOfMemoryError too, with nothing changed.)
  void check() const;

 private:
  struct Item {
    std::string what;
    uint64_t count, bytes_each;
    bool on_host;
  };
  uint64_t sum(bool on_host) const;
  std::string what_;
  std::vector<Item> items_;
};

}  // namespace tinyfuse

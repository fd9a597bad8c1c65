#include "core/host_scratch.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/host_memory.h"
#include "tinyfuse/errors.h"

namespace tinyfuse {

namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kMinCachedBytes = size_t{64} << 10;

class ScratchCache {
 public:
  ~ScratchCache() { trim(); }

  void* alloc(size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    check_host_request(bytes, what);
    const size_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (size >= kMinCachedBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first / 2 <= size) {
        void* p = it->second;
        cached_ -= it->first;
        live_.emplace(p, it->first);
        free_.erase(it);
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlignment, size);
    if (!p) {
      trim();  // what is kept may be what stands in the way
      p = std::aligned_alloc(kAlignment, size);
      if (!p) throw OutOfMemoryError(size, what, "the allocation failed");
    }
    if (size >= kMinCachedBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.emplace(p, size);
    }
    return p;
  }

  void free(void* p) {
    if (!p) return;
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) {  // a small block: never cached
      lock.unlock();
      std::free(p);
      return;
    }
    const size_t size = it->second;
    live_.erase(it);
    free_.emplace(size, p);
    cached_ += size;
    // Bounded: a quarter of the machine's memory, the largest kept blocks going first.
    const size_t limit = static_cast<size_t>(host_memory_bytes() / 4);
    while (cached_ > limit && !free_.empty()) {
      auto largest = std::prev(free_.end());
      cached_ -= largest->first;
      std::free(largest->second);
      free_.erase(largest);
    }
  }

  void trim() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

  size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;       // kept blocks by size
  std::unordered_map<void*, size_t> live_;  // cacheable blocks in use, with their sizes
  size_t cached_ = 0;
};

ScratchCache& cache() {
  static ScratchCache* c = new ScratchCache;  // never destroyed: buffers may be freed during exit
  return *c;
}

}  // namespace

void* host_scratch_alloc(size_t bytes, const char* what) { return cache().alloc(bytes, what); }
void host_scratch_free(void* p) { cache().free(p); }
void host_scratch_trim() { cache().trim(); }
size_t host_scratch_cached_bytes() { return cache().cached(); }

}  // namespace tinyfuse

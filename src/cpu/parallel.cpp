#include "cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace tinyfuse::cpu {

namespace {

// A fixed pool of workers that take chunk indices from a shared counter. One job at a time:
// a second caller (another thread training another model) runs its chunks inline instead of
// waiting, which gives the same results since chunking does not depend on who runs a chunk.
class Pool {
 public:
  explicit Pool(int n_threads) {
    for (int i = 0; i + 1 < n_threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  bool try_run(int64_t n_chunks, const std::function<void(int64_t)>& chunk) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &chunk;
      n_chunks_ = n_chunks;
      next_.store(0);
      done_ = 0;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return done_ == n_chunks_; });
    job_ = nullptr;
    return true;
  }

 private:
  void drain() {
    int64_t finished_here = 0;
    for (int64_t i; (i = next_.fetch_add(1)) < n_chunks_;) {
      (*job_)(i);
      ++finished_here;
    }
    if (finished_here) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ += finished_here;
      if (done_ == n_chunks_) finished_.notify_all();
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_); });
        if (stop_) return;
        seen = generation_;
      }
      drain();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_, mutex_;
  std::condition_variable wake_, finished_;
  const std::function<void(int64_t)>* job_ = nullptr;
  std::atomic<int64_t> next_{0};
  int64_t n_chunks_ = 0, done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int threads_from_env() {
  if (const char* s = std::getenv("TINYFUSE_NUM_THREADS")) {
    int n = std::atoi(s);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool p(threads_from_env());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t n_chunks = (n + grain - 1) / grain;
  auto chunk = [&](int64_t i) { fn(i * grain, std::min(n, (i + 1) * grain)); };
  if (n_chunks == 1 || pool().size() == 1 || !pool().try_run(n_chunks, chunk))
    for (int64_t i = 0; i < n_chunks; ++i) chunk(i);
}

}  // namespace tinyfuse::cpu

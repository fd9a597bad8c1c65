#include "copy_bandwidth.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "cpu/parallel.h"

namespace tinyfuse::bench {

CopyRate measure_copy_bandwidth(const TimingPlan& plan, size_t bytes) {
  CopyRate r;
  r.bytes = bytes;
  try {
    std::vector<char> a(bytes, 1), b(bytes, 0);  // written first: no page faults in the timed runs
    constexpr int64_t kChunk = int64_t{1} << 20;
    const int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
    r.seconds = time_runs(plan, [] {}, [&] {
      cpu::parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
        const size_t from = static_cast<size_t>(begin * kChunk);
        const size_t to = std::min(bytes, static_cast<size_t>(end * kChunk));
        std::memcpy(b.data() + from, a.data() + from, to - from);
      });
    });
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace tinyfuse::bench

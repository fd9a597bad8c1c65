// Captures what a piece of work enqueues on a stream into a graph, for tests that ask whether a
// call can be captured and replayed. The capture is ended whatever the work does, so that a call
// that throws mid-capture cannot leave the stream capturing (and fail every test after it).
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "cuda/gpu_runtime.h"

namespace tinyfuse::testing {

class CapturedGraph {
 public:
  // Runs `work` between the begin and the end of a capture on `stream`; what it throws is kept
  // (failure()), not passed on, so the caller can assert on it after the capture has ended.
  template <class Work>
  CapturedGraph(gpuStream_t stream, gpuStreamCaptureMode mode, Work&& work) {
    begin_ = gpuStreamBeginCapture(stream, mode);
    if (begin_ != gpuSuccess) return;
    try {
      std::forward<Work>(work)();
    } catch (const std::exception& e) {
      failure_ = e.what();
    } catch (...) {
      failure_ = "a non-standard exception";
    }
    end_ = gpuStreamEndCapture(stream, &graph_);
  }
  ~CapturedGraph() {
    if (exec_) (void)gpuGraphExecDestroy(exec_);
    if (graph_) (void)gpuGraphDestroy(graph_);
    (void)gpuGetLastError();  // a failed capture's error is this object's to report, not the next call's
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // "" when the capture began and ended and the work threw nothing; else what went wrong.
  std::string failure() const {
    if (begin_ != gpuSuccess) return std::string("begin capture: ") + gpuGetErrorString(begin_);
    if (!failure_.empty()) return failure_;
    if (end_ != gpuSuccess) return std::string("end capture: ") + gpuGetErrorString(end_);
    return "";
  }

  // Instantiates the graph (once) and launches it on `stream`; does not wait for it.
  gpuError_t launch(gpuStream_t stream) {
    if (!failure().empty() || !graph_) return gpuErrorInvalidValue;
    if (!exec_) {
      const gpuError_t made = gpuGraphInstantiateWithFlags(&exec_, graph_, 0);
      if (made != gpuSuccess) return made;
    }
    return gpuGraphLaunch(exec_, stream);
  }

 private:
  gpuError_t begin_ = gpuErrorInvalidValue, end_ = gpuErrorInvalidValue;
  std::string failure_;
  gpuGraph_t graph_ = nullptr;
  gpuGraphExec_t exec_ = nullptr;
};

}  // namespace tinyfuse::testing

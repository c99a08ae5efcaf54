//===- WorkPool.h - CPU threads of lina-gpu-suite ---------------*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_GPU_WORKPOOL_H
#define LINA_TEST_GPU_WORKPOOL_H

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lina::gpusuite {


/// A fixed set of worker threads with two queues. Inputs and reference
/// checks go first: each holds a whole problem in memory, so draining them
/// bounds memory, and the compiles behind them are waited for only by the
/// GPU loop. No task waits for another, so no order can deadlock.
class WorkPool {
public:
  explicit WorkPool(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i)
      workers_.emplace_back([this] { work(); });
  }
  ~WorkPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread &worker : workers_)
      worker.join();
  }

  void submit(std::function<void()> task, bool urgent) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      (urgent ? urgent_ : background_).push_back(std::move(task));
    }
    ready_.notify_one();
  }

private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] {
          return stopping_ || !urgent_.empty() || !background_.empty();
        });
        std::deque<std::function<void()>> &queue =
            !urgent_.empty() ? urgent_ : background_;
        if (queue.empty())
          return; // stopping, and nothing left to do
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> urgent_, background_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

} // namespace lina::gpusuite

#endif // LINA_TEST_GPU_WORKPOOL_H

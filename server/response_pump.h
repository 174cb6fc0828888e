// A thread that makes the gRPC calls (StartWrite, Finish) of the streaming
// and unary reactors on behalf of the engine thread. Those calls may run
// gRPC's transport work inline (framing, the socket write, waking a
// poller): on the engine thread that time would add to every step. The
// engine thread only queues a task here (a lock and a notify).
//
// Tasks hold shared ownership of what they touch, so a task that runs after
// its call finished finds a live object that does nothing.
#ifndef TRIBUTARY_SERVER_RESPONSE_PUMP_H_
#define TRIBUTARY_SERVER_RESPONSE_PUMP_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tributary {

class ResponsePump {
 public:
  ResponsePump();
  ~ResponsePump();  // runs what is queued, then joins

  ResponsePump(const ResponsePump&) = delete;
  ResponsePump& operator=(const ResponsePump&) = delete;

  void Post(std::function<void()> task);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_RESPONSE_PUMP_H_

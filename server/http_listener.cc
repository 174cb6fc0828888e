#include "server/http_listener.h"

#include <openssl/ssl.h>
#include <signal.h>

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/status.hpp"
#include "boost/beast/http/string_body.hpp"
#include "server/http_content_decoder.h"

namespace tributary {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// A refused connection's answer gets this long to leave, and its client
// this long to stop sending (lingering close), before the socket closes.
constexpr absl::Duration kRefusalWrite = absl::Seconds(5);
constexpr absl::Duration kLinger = absl::Seconds(2);
// ...and at most this much of what it still sends is read: a flood is cut
// off, not read at the speed the client can write.
constexpr size_t kLingerBytes = 256 << 10;
// After a failed accept (out of descriptors), the next try waits this long
// instead of spinning.
constexpr absl::Duration kAcceptRetry = absl::Milliseconds(50);

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

std::string Seconds(absl::Duration d) {
  return absl::StrCat(absl::ToDoubleSeconds(d), " s");
}

// Threads that run the requests whose handler waits; FIFO.
class WorkerPool {
 public:
  explicit WorkerPool(int num_threads) {
    for (int i = 0; i < num_threads; ++i) {
      threads_.emplace_back([this] { Run(); });
    }
  }
  ~WorkerPool() { Stop(); }

  void Post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  // Runs what was posted, then joins. Idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// "HTTP/1.1 200 OK\r\n", the response's headers, its framing.
// `content_length` < 0: a chunked (HTTP/1.1) or close-delimited body.
std::string FormatHead(const HttpResponse& r, int64_t content_length,
                       bool chunked, bool close) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(r.status));
  std::string head =
      absl::StrCat("HTTP/1.1 ", r.status, " ",
                   absl::string_view(reason.data(), reason.size()), "\r\n");
  for (const auto& [name, value] : r.headers) {
    absl::StrAppend(&head, name, ": ", value, "\r\n");
  }
  if (!r.content_type.empty()) {
    absl::StrAppend(&head, "Content-Type: ", r.content_type, "\r\n");
  }
  if (content_length >= 0) {
    absl::StrAppend(&head, "Content-Length: ", content_length, "\r\n");
  } else if (chunked) {
    absl::StrAppend(&head, "Transfer-Encoding: chunked\r\n");
  }
  if (close) absl::StrAppend(&head, "Connection: close\r\n");
  absl::StrAppend(&head, "\r\n");
  return head;
}

// A parse error of Beast's (not a socket's or TLS's).
bool IsHttpError(const error_code& ec) {
  return ec.category() == make_error_code(http::error::end_of_stream).category();
}

tcp::socket& Socket(tcp::socket& s) { return s; }
tcp::socket& Socket(ssl::stream<tcp::socket>& s) { return s.next_layer(); }

}  // namespace

// The connections' common face, for the listener's registry.
class HttpConnection {
 public:
  virtual ~HttpConnection() = default;
  // The listener stops: a connection that is not being answered closes.
  virtual void OnStop() = 0;
};

struct HttpListener::Impl {
  Impl(const HttpListenerOptions& o, HttpHandler* h)
      : options(o), handler(h), workers(o.worker_threads) {}

  const HttpListenerOptions options;
  HttpHandler* const handler;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::optional<ssl::context> tls;
  bool mutual_tls = false;
  int port = -1;
  std::string over_capacity_answer;  // the 503, written as it is
  // Where every lingering connection reads what it throws away (a
  // member, not a thread_local: static TLS is carved from every thread's
  // stack, the exposer's small ones too).
  std::array<char, 64 << 10> discard;
  WorkerPool workers;
  std::thread io_thread;
  bool stopped = false;  // Stop() ran (caller's thread)
  bool stopping = false;  // event thread

  std::mutex mu;
  std::condition_variable all_closed;
  uint64_t next_id = 0;
  std::unordered_map<uint64_t, std::weak_ptr<HttpConnection>> connections;

  int num_connections() {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(connections.size());
  }
  uint64_t Register(std::weak_ptr<HttpConnection> c) {
    std::lock_guard<std::mutex> lock(mu);
    connections.emplace(next_id, std::move(c));
    return next_id++;
  }
  void Unregister(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    connections.erase(id);
    if (connections.empty()) all_closed.notify_all();
  }

  void Accept();
  void OnAccept(tcp::socket socket);
};

namespace {

// One connection, on a plaintext socket or a TLS stream. Every method but
// the worker's (Serve and what it calls: WriteBlocking, Finish) runs on the
// event thread; the worker's reach the socket only by posting there.
//
// The socket stays open while a worker answers a request on it, whatever
// happens to the client (a failed write shuts it down instead): the
// router's ClientWatch polls its descriptor, which must not be reused.
template <typename Stream>
class Connection : public HttpConnection,
                   public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(HttpListener::Impl& listener, Stream stream)
      : listener_(listener),
        options_(listener.options),
        stream_(std::move(stream)),
        timer_(listener.io),
        buffer_(static_cast<size_t>(options_.max_head_bytes)) {}
  ~Connection() override {
    error_code ec;
    Socket(stream_).close(ec);
    listener_.Unregister(id_);
  }

  void Start() {
    id_ = listener_.Register(this->weak_from_this());
    error_code ec;
    Socket(stream_).set_option(tcp::no_delay(true), ec);  // SSE events
    // The head's deadline starts at the accept: a client that connects
    // and sends nothing, or a handshake that drags, is closed by it.
    Arm(options_.head_timeout);
    if constexpr (std::is_same_v<Stream, ssl::stream<tcp::socket>>) {
      state_ = State::kHandshake;
      stream_.async_handshake(
          ssl::stream_base::server, [self = this->shared_from_this()](error_code ec) {
            if (ec || self->listener_.stopping) return self->Close();
            self->ReadHead();
          });
    } else {
      ReadHead();
    }
  }

  void OnStop() override {
    if (state_ != State::kServing && state_ != State::kClosed) Close();
  }

 private:
  enum class State { kHandshake, kIdle, kHead, kBody, kServing, kLinger, kClosed };

  // One deadline at a time; a newer Arm (or Disarm) voids the older.
  void Arm(absl::Duration d) {
    const uint64_t generation = ++timer_generation_;
    timed_out_ = false;
    timer_.expires_after(ToChrono(d));
    timer_.async_wait([self = this->shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->timer_generation_) return;
      self->OnTimeout();
    });
  }
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void OnTimeout() {
    timed_out_ = true;
    switch (state_) {
      case State::kHandshake:
      case State::kIdle:
      case State::kLinger:
        Close();
        break;
      case State::kHead:
      case State::kBody:
      case State::kServing:
        // The pending read or write completes with operation_aborted and
        // sees timed_out_.
        {
          error_code ec;
          Socket(stream_).cancel(ec);
        }
        break;
      case State::kClosed:
        break;
    }
  }

  // Between requests: no buffer is held while the client is idle; the
  // head's deadline starts with its first byte. (Over TLS, bytes already
  // decrypted may wait inside the stream, so the head is read at once,
  // under the idle deadline.)
  void WaitForRequest() {
    if (buffer_.size() > 0) {
      Arm(options_.head_timeout);
      return ReadHead();
    }
    buffer_.shrink_to_fit();
    Arm(options_.idle_timeout);
    if constexpr (std::is_same_v<Stream, ssl::stream<tcp::socket>>) {
      ReadHead();
    } else {
      state_ = State::kIdle;
      Socket(stream_).async_wait(
          tcp::socket::wait_read, [self = this->shared_from_this()](error_code ec) {
            if (ec || self->listener_.stopping) return self->Close();
            self->Arm(self->options_.head_timeout);
            self->ReadHead();
          });
    }
  }

  void ReadHead() {
    state_ = State::kHead;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options_.max_head_bytes));
    parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, size_t) {
          self->OnHead(ec);
        });
  }

  void OnHead(error_code ec) {
    if (listener_.stopping) return Close();
    if (ec) {
      if (timed_out_) {
        return Refuse(408, absl::StrCat("the request head did not arrive within ",
                                        Seconds(options_.head_timeout),
                                        " (--http-head-timeout)"));
      }
      if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
        return Refuse(431, absl::StrCat("the request head is larger than ",
                                        options_.max_head_bytes,
                                        " bytes (--http-max-head-bytes)"));
      }
      if (ec == http::error::body_limit) return RefuseTooLarge();
      if (ec == http::error::bad_content_length) {
        return Refuse(400, "the Content-Length is not a length this server "
                           "can take (a decimal count of bytes)");
      }
      if (IsHttpError(ec)) {
        // The client closed before a request (end_of_stream, partial_message).
        if (ec == http::error::end_of_stream || ec == http::error::partial_message) {
          return Close();
        }
        return Refuse(400, absl::StrCat("malformed HTTP request (", ec.message(), ")"));
      }
      return Close();  // a reset, a TLS error
    }
    const auto& message = parser_->get();
    int num_headers = 0;
    for (auto it = message.begin(); it != message.end(); ++it) ++num_headers;
    if (num_headers > options_.max_headers) {
      return Refuse(431, absl::StrCat("the request has more than ",
                                      options_.max_headers,
                                      " headers (--http-max-headers)"));
    }
    // An encoding that cannot be undone is refused before the body is read.
    const std::string encoding(message[http::field::content_encoding]);
    if (absl::Status s = CheckContentEncoding(encoding); !s.ok()) {
      return Refuse(415, std::string(s.message()));
    }
    if (parser_->is_done()) return Dispatch();
    state_ = State::kBody;
    Arm(options_.body_timeout);
    if (message.version() == 11 &&
        absl::EqualsIgnoreCase(std::string(message[http::field::expect]),
                               "100-continue")) {
      // The client waits for this before it sends the body.
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(kContinue),
                        [self = this->shared_from_this()](error_code ec, size_t) {
                          if (ec) return self->OnBody(ec);
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](error_code ec, size_t) {
                       self->OnBody(ec);
                     });
  }

  void OnBody(error_code ec) {
    if (listener_.stopping) return Close();
    if (!ec) return Dispatch();
    if (timed_out_) {
      return Refuse(408, absl::StrCat("the request body did not arrive within ",
                                      Seconds(options_.body_timeout),
                                      " (--http-body-timeout)"));
    }
    if (ec == http::error::body_limit) return RefuseTooLarge();
    if (IsHttpError(ec) &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Refuse(400, absl::StrCat("the request body could not be read (",
                                      ec.message(), ")"));
    }
    Close();  // the client left mid-body
  }

  void RefuseTooLarge() {
    Refuse(413, absl::StrCat("the body is larger than ", options_.max_body_bytes,
                             " bytes (--max-message-bytes)"));
  }

  // A complete request: decoded, then to the router.
  void Dispatch() {
    Disarm();
    state_ = State::kServing;
    auto& message = parser_->get();
    auto request = std::make_shared<HttpRequest>();
    request->method = std::string(message.method_string());
    request->target = std::string(message.target());
    request->path = request->target.substr(0, request->target.find('?'));
    request->version = static_cast<int>(message.version());
    for (const auto& field : message) {
      request->headers.emplace_back(std::string(field.name_string()),
                                    std::string(field.value()));
    }
    request->socket_fd = Socket(stream_).native_handle();
    keep_alive_ = message.keep_alive() && request->version == 11;
    const std::string encoding(message[http::field::content_encoding]);
    std::string body = std::move(message.body());
    parser_.reset();
    ++requests_served_;
    absl::StatusOr<std::string> decoded =
        DecodeContent(encoding, std::move(body), options_.max_body_bytes);
    if (!decoded.ok()) {
      // The body was read to its end: the connection may serve more.
      HttpResponse response;
      const int status = absl::IsResourceExhausted(decoded.status()) ? 413 : 400;
      listener_.handler->OnRefusal(status);
      listener_.handler->FillError(status, std::string(decoded.status().message()),
                                   &response);
      return WriteResponse(request->method == "HEAD", std::move(response));
    }
    request->body = *std::move(decoded);
    if (listener_.handler->Blocks(*request)) {
      listener_.workers.Post([self = this->shared_from_this(), request] {
        self->Serve(*request);
      });
    } else {
      HttpResponse response;
      listener_.handler->Handle(*request, &response);
      WriteResponse(request->method == "HEAD", std::move(response));
    }
  }

  // On the event thread: a whole answer (its headers only for HEAD), then
  // the next request.
  void WriteResponse(bool head_only, HttpResponse response) {
    const bool close = response.close_connection || !keep_alive_ ||
                       requests_served_ >= options_.max_requests_per_connection ||
                       listener_.stopping;
    auto bytes = std::make_shared<std::string>(FormatHead(
        response, static_cast<int64_t>(response.body.size()), false, close));
    if (!head_only) bytes->append(response.body);
    StartWrite(bytes, options_.write_timeout,
               [self = this->shared_from_this(), close](bool ok) {
                 self->AfterResponse(close || !ok);
               });
  }

  // On a worker: the router waits for the engine; a stream's writes block
  // this thread (never the event thread) until each left.
  void Serve(const HttpRequest& request) {
    HttpResponse response;
    listener_.handler->Handle(request, &response);
    if (!response.stream) {
      asio::post(listener_.io, [self = this->shared_from_this(),
                                head_only = request.method == "HEAD",
                                response = std::move(response)]() mutable {
        self->WriteResponse(head_only, std::move(response));
      });
      return;
    }
    // HTTP/1.0 has no chunks: the body ends with the connection.
    const bool chunked = request.version == 11;
    bool close = response.close_connection || !keep_alive_ || !chunked;
    bool ok = WriteBlocking(FormatHead(response, -1, chunked, close));
    if (ok) {
      struct Writer : HttpBodyWriter {
        Connection* connection;
        bool chunked;
        bool Write(absl::string_view data) override {
          if (data.empty()) return true;  // an empty chunk would end the body
          if (!chunked) return connection->WriteBlocking(std::string(data));
          return connection->WriteBlocking(absl::StrCat(
              absl::Hex(data.size()), "\r\n", data, "\r\n"));
        }
      } writer;
      writer.connection = this;
      writer.chunked = chunked;
      ok = response.stream(writer);
      if (ok && chunked) ok = WriteBlocking("0\r\n\r\n");
    }
    if (response.on_done) response.on_done();
    close = close || !ok;
    asio::post(listener_.io, [self = this->shared_from_this(), close] {
      self->AfterResponse(close);
    });
  }

  // From a worker: one write through the event thread, waited for.
  bool WriteBlocking(std::string bytes) {
    std::promise<bool> written;
    std::future<bool> result = written.get_future();
    auto shared = std::make_shared<std::string>(std::move(bytes));
    asio::post(listener_.io, [self = this->shared_from_this(), shared, &written] {
      self->StartWrite(shared, self->options_.write_timeout,
                       [&written](bool ok) { written.set_value(ok); });
    });
    return result.get();
  }

  void StartWrite(std::shared_ptr<std::string> bytes, absl::Duration timeout,
                  std::function<void(bool)> done) {
    if (broken_) return done(false);
    Arm(timeout);
    asio::async_write(stream_, asio::buffer(*bytes),
                      [self = this->shared_from_this(), bytes,
                       done = std::move(done)](error_code ec, size_t) {
                        self->Disarm();
                        if (ec) self->Break();
                        done(!ec);
                      });
  }

  // A write failed while a request is answered: the client is told (by
  // FIN) and the router's ClientWatch sees it; the socket closes after.
  void Break() {
    broken_ = true;
    error_code ec;
    Socket(stream_).shutdown(tcp::socket::shutdown_both, ec);
  }

  void AfterResponse(bool close) {
    if (close || broken_ || listener_.stopping) return Linger();
    WaitForRequest();
  }

  // An answer the listener gives by itself, then a lingering close.
  void Refuse(int status, const std::string& message) {
    Disarm();
    state_ = State::kServing;
    parser_.reset();
    HttpResponse response;
    listener_.handler->OnRefusal(status);
    listener_.handler->FillError(status, message, &response);
    auto bytes = std::make_shared<std::string>(FormatHead(
        response, static_cast<int64_t>(response.body.size()), false, true));
    bytes->append(response.body);
    StartWrite(bytes, kRefusalWrite,
               [self = this->shared_from_this()](bool) { self->Linger(); });
  }

  // Closing with unread bytes in the socket would send a reset, which may
  // destroy the answer before the client read it: stop sending, read and
  // drop what still comes for a moment (kLinger, kLingerBytes), then close.
  void Linger() {
    state_ = State::kLinger;
    lingered_bytes_ = 0;
    buffer_.clear();
    buffer_.shrink_to_fit();
    if constexpr (std::is_same_v<Stream, ssl::stream<tcp::socket>>) {
      return Close();  // a TLS close_notify would need its own exchange
    } else {
      error_code ec;
      Socket(stream_).shutdown(tcp::socket::shutdown_send, ec);
      if (ec) return Close();
      Arm(kLinger);
      Drain();
    }
  }
  void Drain() {
    Socket(stream_).async_read_some(
        asio::buffer(listener_.discard), [self = this->shared_from_this()](error_code ec, size_t n) {
          self->lingered_bytes_ += n;
          if (ec || self->state_ != State::kLinger ||
              self->lingered_bytes_ >= kLingerBytes) {
            return self->Close();
          }
          self->Drain();
        });
  }

  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    Disarm();
    error_code ec;
    Socket(stream_).cancel(ec);
    Socket(stream_).shutdown(tcp::socket::shutdown_both, ec);
    // The descriptor closes with the object, once no handler holds it.
  }

  HttpListener::Impl& listener_;
  const HttpListenerOptions& options_;
  Stream stream_;
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;  // at most max_head_bytes
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kHead;
  bool keep_alive_ = false;
  bool broken_ = false;
  int requests_served_ = 0;
  size_t lingered_bytes_ = 0;
  uint64_t id_ = 0;
};

}  // namespace

void HttpListener::Impl::Accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (stopping) return;
    if (ec) {
      // Out of descriptors (EMFILE) or memory: try again shortly, not in a
      // loop that starves the connections being served.
      LogWarning("HTTP API: accept failed: ", ec.message());
      accept_retry.expires_after(ToChrono(kAcceptRetry));
      accept_retry.async_wait([this](error_code e) {
        if (!e && !stopping) Accept();
      });
      return;
    }
    OnAccept(std::move(socket));
    Accept();
  });
}

void HttpListener::Impl::OnAccept(tcp::socket socket) {
  if (num_connections() >= options.max_connections) {
    handler->OnRefusal(503);
    // Answered at once, not queued: one non-blocking write of the 503
    // (plaintext only: over TLS it would need a handshake first), then
    // the socket closes.
    error_code ec;
    if (!tls) {
      socket.non_blocking(true, ec);
      socket.write_some(asio::buffer(over_capacity_answer), ec);
      socket.shutdown(tcp::socket::shutdown_send, ec);
    }
    socket.close(ec);
    return;
  }
  if (tls) {
    auto c = std::make_shared<Connection<ssl::stream<tcp::socket>>>(
        *this, ssl::stream<tcp::socket>(std::move(socket), *tls));
    c->Start();
  } else {
    auto c = std::make_shared<Connection<tcp::socket>>(*this, std::move(socket));
    c->Start();
  }
}

absl::Status HttpListenerOptions::Validate() const {
  auto positive = [](const char* flag, int64_t v) -> absl::Status {
    if (v >= 1) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be >= 1, got ", v));
  };
  auto duration = [](const char* flag, absl::Duration d) -> absl::Status {
    if (d > absl::ZeroDuration()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be > 0"));
  };
  if (absl::Status s = positive("http-threads", worker_threads); !s.ok()) return s;
  if (absl::Status s = positive("http-max-connections", max_connections); !s.ok()) return s;
  if (absl::Status s = positive("http-backlog", backlog); !s.ok()) return s;
  if (absl::Status s = positive("http-max-headers", max_headers); !s.ok()) return s;
  if (max_head_bytes < 1024 || max_head_bytes > (64 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-max-head-bytes must be in [1024, 64 MiB], got ", max_head_bytes));
  }
  if (absl::Status s = positive("max-message-bytes", max_body_bytes); !s.ok()) return s;
  if (absl::Status s = duration("http-head-timeout", head_timeout); !s.ok()) return s;
  if (absl::Status s = duration("http-body-timeout", body_timeout); !s.ok()) return s;
  if (absl::Status s = duration("http-idle-timeout", idle_timeout); !s.ok()) return s;
  if (absl::Status s = duration("stream-write-timeout", write_timeout); !s.ok()) return s;
  return positive("max_requests_per_connection", max_requests_per_connection);
}

HttpListener::HttpListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(
    const HttpListenerOptions& options, HttpHandler* handler) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  // A write to a client that left must fail with EPIPE (also inside
  // OpenSSL), not kill the process.
  signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_unique<Impl>(options, handler);
  if (!options.tls_cert_file.empty()) {
    impl->tls.emplace(ssl::context::tls_server);
    ssl::context& ctx = *impl->tls;
    error_code ec;
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                    ssl::context::no_sslv3 | ssl::context::single_dh_use);
    // The gRPC port's floor.
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    ctx.use_certificate_chain_file(options.tls_cert_file, ec);
    if (!ec) ctx.use_private_key_file(options.tls_key_file, ssl::context::pem, ec);
    if (ec || SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the HTTP API cannot load --tls-cert ", options.tls_cert_file,
          " with --tls-key ", options.tls_key_file,
          " (PEM files; the key must match the certificate)"));
    }
    if (!options.tls_client_ca_file.empty()) {
      impl->mutual_tls = true;
      ctx.load_verify_file(options.tls_client_ca_file, ec);
      // Named in the certificate request, so that a client holding several
      // certificates picks the right one.
      STACK_OF(X509_NAME)* names =
          SSL_load_client_CA_file(options.tls_client_ca_file.c_str());
      if (ec || names == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("the HTTP API cannot read a CA certificate from "
                         "--tls-client-ca ",
                         options.tls_client_ca_file));
      }
      SSL_CTX_set_client_CA_list(ctx.native_handle(), names);  // takes it
      // No certificate from that CA, no handshake.
      ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
  }
  {
    HttpResponse response;
    handler->FillError(503, absl::StrCat("the server has ", options.max_connections,
                                         " HTTP connections open "
                                         "(--http-max-connections); try again"),
                       &response);
    impl->over_capacity_answer =
        FormatHead(response, static_cast<int64_t>(response.body.size()), false, true) +
        response.body;
  }

  const std::string address = absl::StrCat(options.host, ":", options.port);
  auto unavailable = [&](const error_code& ec) {
    return absl::UnavailableError(absl::StrCat("cannot serve the HTTP API on ",
                                               address, " (", ec.message(), ")"));
  };
  error_code ec;
  tcp::resolver resolver(impl->io);
  const auto endpoints = resolver.resolve(
      options.host, std::to_string(options.port),
      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) return unavailable(ec);
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& acceptor = impl->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(options.backlog, ec);
  if (ec) return unavailable(ec);
  impl->port = acceptor.local_endpoint().port();

  Impl* raw = impl.get();
  raw->Accept();
  raw->io_thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<HttpListener>(new HttpListener(std::move(impl)));
}

HttpListener::~HttpListener() { Stop(); }

int HttpListener::port() const { return impl_->port; }
bool HttpListener::tls() const { return impl_->tls.has_value(); }
bool HttpListener::mutual_tls() const { return impl_->mutual_tls; }

void HttpListener::Stop() {
  Impl& impl = *impl_;
  if (impl.stopped) return;
  impl.stopped = true;
  std::promise<void> closed_listener;
  asio::post(impl.io, [&impl, &closed_listener] {
    impl.stopping = true;
    error_code ec;
    impl.acceptor.close(ec);
    impl.accept_retry.cancel();
    std::vector<std::shared_ptr<HttpConnection>> open;
    {
      std::lock_guard<std::mutex> lock(impl.mu);
      for (auto& [id, weak] : impl.connections) {
        if (auto c = weak.lock()) open.push_back(std::move(c));
      }
    }
    for (auto& c : open) c->OnStop();
    closed_listener.set_value();
  });
  closed_listener.get_future().wait();
  // Those being answered finish (their writes still need the event
  // thread), then close.
  {
    std::unique_lock<std::mutex> lock(impl.mu);
    impl.all_closed.wait(lock, [&impl] { return impl.connections.empty(); });
  }
  impl.io.stop();
  if (impl.io_thread.joinable()) impl.io_thread.join();
  impl.workers.Stop();
}

}  // namespace tributary

// Whether the client of an HTTP request has gone away while the request is
// still being served, so that a client that disconnects cancels its
// sequence (streaming or not) instead of letting it run to max_tokens.
//
// Gone() polls the connection's socket (HttpRequest::socket_fd, open while
// the request is served) without reading it. POLLRDHUP (the peer sent FIN),
// POLLHUP or POLLERR (a reset, or the listener shut the socket down after a
// failed write) mean the client went away. Peeking for the end of the
// stream would not do: bytes may come before it (a pipelined request, a TLS
// close_notify alert) and a peek cannot see past them. An HTTP/1.1 client
// never half-closes while it waits for its response, so a FIN is a client
// that left.
//
// Thread-compatible; Gone() is one poll() with a zero timeout.
#ifndef TRIBUTARY_SERVER_CLIENT_WATCH_H_
#define TRIBUTARY_SERVER_CLIENT_WATCH_H_

namespace tributary {

class ClientWatch {
 public:
  ClientWatch() = default;  // no socket: never gone
  explicit ClientWatch(int socket_fd) : fd_(socket_fd) {}  // not owned

  bool has_socket() const { return fd_ >= 0; }
  // True once the peer closed or reset the connection.
  bool Gone() const;

 private:
  int fd_ = -1;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_CLIENT_WATCH_H_

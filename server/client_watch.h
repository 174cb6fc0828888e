// Whether the client of an HTTP request has gone away while the request is
// still being served, so that a client that disconnects cancels its
// sequence (streaming or not) instead of letting it run to max_tokens.
//
// cpp-httplib hands a handler the parsed request, not its connection, so
// the connection's socket is looked up once per request (For):
//   - TLS: the SSL object's descriptor (Request::ssl, SSL_get_fd);
//   - plaintext: the socket of this process whose local and peer addresses
//     are the request's (Request::local_addr/port, remote_addr/port). A TCP
//     connection's address four-tuple is unique, and the socket cannot be
//     closed (and its number reused) while the request's handler runs: only
//     that handler's thread closes it, after the response.
//
// Gone() polls the socket without reading it. POLLRDHUP (the peer sent FIN),
// POLLHUP or POLLERR (a reset) mean the client went away. Peeking for the
// end of the stream would not do: bytes may come before it (a pipelined
// request, a TLS close_notify alert) and a peek cannot see past them. An
// HTTP/1.1 client never half-closes while it waits for its response, so a
// FIN is a client that left.
//
// Thread-compatible; Gone() is one poll() with a zero timeout.
#ifndef TRIBUTARY_SERVER_CLIENT_WATCH_H_
#define TRIBUTARY_SERVER_CLIENT_WATCH_H_

namespace httplib {
struct Request;
}

namespace tributary {

class ClientWatch {
 public:
  ClientWatch() = default;  // no socket: never gone

  // The watch of the connection `request` arrived on. When the socket
  // cannot be found (no /proc), the watch has none and reports "not gone":
  // a disconnect is then noticed only by a failed write.
  static ClientWatch For(const httplib::Request& request);

  bool has_socket() const { return fd_ >= 0; }
  // True once the peer closed or reset the connection.
  bool Gone() const;

 private:
  explicit ClientWatch(int fd) : fd_(fd) {}
  int fd_ = -1;  // not owned
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_CLIENT_WATCH_H_

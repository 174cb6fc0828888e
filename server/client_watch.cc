#include "server/client_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>

#include "httplib.h"

namespace tributary {
namespace {

// An address as cpp-httplib writes it into Request (numeric getnameinfo,
// the port apart), so that the two compare as strings.
bool Describe(const sockaddr_storage& addr, socklen_t length, std::string* ip,
              int* port) {
  if (addr.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return false;
  }
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), length, host,
                  sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  *ip = host;
  return true;
}

bool Matches(int fd, const httplib::Request& request) {
  sockaddr_storage addr{};
  socklen_t length = sizeof(addr);
  std::string ip;
  int port = -1;
  // Not a socket (a file, a pipe): fails at once.
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0 ||
      !Describe(addr, length, &ip, &port) || port != request.local_port ||
      ip != request.local_addr) {
    return false;
  }
  length = sizeof(addr);
  // The listening socket has the same local address but no peer.
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0 ||
      !Describe(addr, length, &ip, &port)) {
    return false;
  }
  return port == request.remote_port && ip == request.remote_addr;
}

// The plaintext connection's socket: the process's descriptors are listed
// by /proc/self/fd (tens to a few hundred in a server; each costs one
// failed or compared getsockname).
int FindPlaintextSocket(const httplib::Request& request) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (Matches(static_cast<int>(fd), request)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

ClientWatch ClientWatch::For(const httplib::Request& request) {
  if (request.ssl != nullptr) return ClientWatch(SSL_get_fd(request.ssl));
  return ClientWatch(FindPlaintextSocket(request));
}

bool ClientWatch::Gone() const {
  if (fd_ < 0) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return false;  // nothing, or EINTR: ask again later
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace tributary

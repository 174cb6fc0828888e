#include "server/client_watch.h"

#include <poll.h>

namespace tributary {

bool ClientWatch::Gone() const {
  if (fd_ < 0) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return false;  // nothing, or EINTR: ask again later
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace tributary

#include "net/tcpstore/watch_channel.h"

#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/fiber_context.h"
#include "core/runtime/spawner.h"

namespace dagsim::net::tcpstore {

// The reader: decodes acknowledgements and events until the stream fails, then fails the channel
// (waking every waiter). It holds the channel, which so lives until the reader has ended.
struct WatchChannel::Reader {
  static void run(const std::shared_ptr<WatchChannel>& channel) {
    FiberStream& stream = *channel->stream_;
    WatchEvent event;
    try {
      for (;;) {
        const Decoded d = decode_watch_event(stream.data(), channel->limits_, event);
        if (d.status == Decoded::Status::malformed) {
          stream.close("a malformed watch message: " + d.error);
          break;
        }
        if (d.status == Decoded::Status::incomplete) {
          stream.fill(d.needed, std::nullopt);
          continue;
        }
        stream.consume(d.consumed);
        runtime::FiberLock lock(channel->mutex_);
        if (event.type == WatchResponse::callback_registered) {
          ++channel->registrations_acked_;
        } else {
          ++channel->events_[event.key];
        }
        channel->cv_.notify_all();
      }
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (e.code() != ErrorCode::connection_failed) throw;
    }
    channel->fail(stream.close_reason().empty() ? "closed" : stream.close_reason());
  }
};

WatchChannel::WatchChannel(std::shared_ptr<FiberStream> stream, WireLimits limits)
    : stream_(std::move(stream)), limits_(limits) {}

WatchChannel::~WatchChannel() { stream_->close("the watch channel closed"); }

std::shared_ptr<WatchChannel> WatchChannel::open(std::shared_ptr<FiberStream> stream, WireLimits limits) {
  runtime::FiberContext* self = runtime::current_fiber();
  if (self == nullptr || self->spawner == nullptr) {
    throw errors::internal_error("tcpstore: a watch needs a fiber started by a Spawner");
  }
  std::shared_ptr<WatchChannel> channel(new WatchChannel(std::move(stream), limits));
  // In the node's lifetime, not the caller's scope: the channel serves every later watch.
  self->spawner->spawn("tcpstore watch " + channel->stream_->peer(), [channel] { Reader::run(channel); });
  return channel;
}

void WatchChannel::fail(const std::string& why) {
  runtime::FiberLock lock(mutex_);
  if (failed_) return;
  failed_ = true;
  reason_ = why;
  cv_.notify_all();
}

void WatchChannel::throw_failed() const {
  throw errors::connection_failed("the watch connection to " + stream_->peer() + " failed: " + reason_);
}

void WatchChannel::close() {
  stream_->close("the watch channel closed");
  fail("closed");
}

bool WatchChannel::register_key(const std::string& key, runtime::TimePoint deadline) {
  if (failed_) throw_failed();
  if (registered_.contains(key)) return true;
  Query q;
  q.type = QueryType::watch_key;
  q.keys = {key};
  stream_->send(encode_query(q));
  registered_.insert(key);
  const uint64_t mine = ++registrations_sent_;
  runtime::FiberLock lock(mutex_);
  if (!runtime::block_until(cv_, lock, [&] { return failed_ || registrations_acked_ >= mine; }, deadline,
                            "tcpstore.watch_register")) {
    // An acknowledgement still in flight would make a later register_key of this key return
    // before the server holds it: this channel is done, and the client opens another.
    lock.unlock();
    close();
    return false;
  }
  if (registrations_acked_ < mine) throw_failed();
  return true;
}

uint64_t WatchChannel::events(const std::string& key) const {
  const auto it = events_.find(key);
  return it == events_.end() ? 0 : it->second;
}

bool WatchChannel::wait_for_event(const std::string& key, uint64_t seen, runtime::TimePoint deadline) {
  runtime::FiberLock lock(mutex_);
  if (!runtime::block_until(cv_, lock, [&] { return failed_ || events(key) != seen; }, deadline, "tcpstore.watch")) {
    return false;
  }
  if (events(key) == seen) throw_failed();
  return true;
}

}  // namespace dagsim::net::tcpstore

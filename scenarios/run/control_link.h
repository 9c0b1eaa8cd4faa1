// ControlLink: the TCP launcher's line to one of its node processes (and the node's line back): a
// Unix socket pair the launcher makes and the child inherits, carrying one JSON object per line.
// It is not part of the data plane: no peer can reach it, so it needs no handshake, and nothing
// on it is ever executed, only matched against the few operations below.
//
//   launcher -> node   {"op":"start","start_wall_ns":T}   run the node's main (scenario time 0 = T)
//                      {"op":"crash"}                      go silent and end the incarnation
//                      {"op":"block","peer":K,"blocked":B} hold (or release) traffic to worker K
//                      {"op":"finish","drain_ms":D}        settle (at most D ms), final snapshot, record
//                      {"op":"exit"}                       close and exit 0
//   node -> launcher   {"event":"hello","incarnation":I,"pid":P}
//                      {"event":"busy"} / {"event":"idle"}  foreground work began / all of it ended
//                      {"event":"failure","time_ns":T,"fiber":F,"what":W}
//                      {"event":"connection_failed","peer":K,"time_ns":T}
//                      {"event":"finished","stats":{...}}
//
// Promises: messages arrive whole and in order; a line longer than kMaxControlLine or one that is
// not a JSON object closes the link (reported through on_closed, as is EOF). Callbacks run as Asio
// handlers on the io_context's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/streambuf.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace dagsim::scenarios {

inline constexpr size_t kMaxControlLine = 1 << 20;

class ControlLink : public std::enable_shared_from_this<ControlLink> {
 public:
  using OnMessage = std::function<void(const nlohmann::json&)>;
  using OnClosed = std::function<void(const std::string& why)>;

  // Takes ownership of `fd`, one end of a socket pair.
  ControlLink(boost::asio::io_context& io, int fd);

  // Starts reading; callbacks until on_closed, which is called once.
  void start(OnMessage on_message, OnClosed on_closed);
  // Queues one message; never blocks.
  void send(const nlohmann::json& message);
  // True when everything sent has been written (a process about to exit waits for it).
  bool drained() const { return output_.empty() && !writing_; }
  void close();

 private:
  void read();
  void write();

  boost::asio::local::stream_protocol::socket socket_;
  boost::asio::streambuf input_{kMaxControlLine};
  std::deque<std::string> output_;
  bool writing_ = false;
  bool closed_ = false;
  OnMessage on_message_;
  OnClosed on_closed_;
};

}  // namespace dagsim::scenarios

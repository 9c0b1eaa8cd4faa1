#include "scenarios/run/control_link.h"

#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

namespace dagsim::scenarios {

namespace asio = boost::asio;

ControlLink::ControlLink(asio::io_context& io, int fd) : socket_(io) {
  socket_.assign(asio::local::stream_protocol(), fd);
}

void ControlLink::start(OnMessage on_message, OnClosed on_closed) {
  on_message_ = std::move(on_message);
  on_closed_ = std::move(on_closed);
  read();
}

void ControlLink::read() {
  asio::async_read_until(socket_, input_, '\n', [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
    if (self->closed_) return;
    if (ec) {
      const std::string why = ec == asio::error::eof          ? "closed"
                              : ec == asio::error::not_found ? "a control line longer than the limit"
                                                             : ec.message();
      self->close();
      if (self->on_closed_) self->on_closed_(why);
      return;
    }
    std::string line(asio::buffers_begin(self->input_.data()), asio::buffers_begin(self->input_.data()) + static_cast<std::ptrdiff_t>(n));
    self->input_.consume(n);
    nlohmann::json message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!message.is_object()) {
      self->close();
      if (self->on_closed_) self->on_closed_("a control line that is not a JSON object");
      return;
    }
    if (self->on_message_) self->on_message_(message);
    self->read();
  });
}

void ControlLink::send(const nlohmann::json& message) {
  if (closed_) return;
  output_.push_back(message.dump() + "\n");
  write();
}

void ControlLink::write() {
  if (writing_ || output_.empty() || closed_) return;
  writing_ = true;
  asio::async_write(socket_, asio::buffer(output_.front()), [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    self->output_.pop_front();
    if (ec) {
      self->close();
      if (self->on_closed_) self->on_closed_(ec.message());
      return;
    }
    self->write();
  });
}

void ControlLink::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

}  // namespace dagsim::scenarios

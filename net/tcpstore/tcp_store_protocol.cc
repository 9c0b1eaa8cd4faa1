#include "net/tcpstore/tcp_store_protocol.h"

#include <cstring>

#include "core/base/assert.h"

namespace dagsim::net::tcpstore {

const char* query_name(QueryType type) {
  switch (type) {
    case QueryType::set: return "SET";
    case QueryType::compare_set: return "COMPARE_SET";
    case QueryType::get: return "GET";
    case QueryType::add: return "ADD";
    case QueryType::check: return "CHECK";
    case QueryType::wait: return "WAIT";
    case QueryType::get_num_keys: return "GETNUMKEYS";
    case QueryType::watch_key: return "WATCH_KEY";
    case QueryType::delete_key: return "DELETE_KEY";
  }
  return "?";
}

void append_u64(Bytes& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void append_i64(Bytes& out, int64_t v) { append_u64(out, static_cast<uint64_t>(v)); }

void append_blob(Bytes& out, std::span<const uint8_t> bytes) {
  append_u64(out, bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
}

uint64_t read_u64(std::span<const uint8_t> eight) {
  DAGSIM_ASSERT(eight.size() >= 8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | eight[static_cast<size_t>(i)];
  return v;
}

namespace {

std::span<const uint8_t> text_span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Reads fields from the front of a buffer that may end anywhere. Each read either succeeds, or
// stops the cursor: short (the frame goes on past the buffer; `needed` says how far) or bad (a
// length over its limit, an unknown type), checked before anything is allocated.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> buffer) : buffer_(buffer) {}

  bool u8(uint8_t& v) {
    if (!have(1)) return false;
    v = buffer_[pos_++];
    return true;
  }
  bool u64(uint64_t& v) {
    if (!have(8)) return false;
    v = read_u64(buffer_.subspan(pos_, 8));
    pos_ += 8;
    return true;
  }
  bool length(uint64_t& n, uint64_t limit, const std::string& what) {
    if (!u64(n)) return false;
    if (n > limit) return fail(what + " of " + std::to_string(n) + " bytes, over the limit of " + std::to_string(limit));
    return true;
  }
  bool blob(Bytes& out, uint64_t limit, const std::string& what) {
    uint64_t n = 0;
    if (!length(n, limit, what) || !have(n)) return false;
    out.assign(buffer_.begin() + static_cast<ptrdiff_t>(pos_), buffer_.begin() + static_cast<ptrdiff_t>(pos_ + n));
    pos_ += n;
    return true;
  }
  bool text(std::string& out, uint64_t limit, const std::string& what) {
    uint64_t n = 0;
    if (!length(n, limit, what) || !have(n)) return false;
    out.assign(reinterpret_cast<const char*>(buffer_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  Decoded result() const {
    Decoded d;
    if (!error_.empty()) {
      d.status = Decoded::Status::malformed;
      d.error = error_;
    } else if (needed_ > 0) {
      d.status = Decoded::Status::incomplete;
      d.needed = needed_;
    } else {
      d.status = Decoded::Status::complete;
      d.consumed = pos_;
    }
    return d;
  }

 private:
  bool have(uint64_t n) {
    if (buffer_.size() - pos_ >= n) return true;
    needed_ = pos_ + n;
    return false;
  }

  std::span<const uint8_t> buffer_;
  size_t pos_ = 0;
  size_t needed_ = 0;
  std::string error_;
};

}  // namespace

Decoded decode_query(std::span<const uint8_t> buffer, const WireLimits& limits, Query& out) {
  Cursor c(buffer);
  out = Query{};
  uint8_t type = 0;
  auto key = [&] { return c.text(out.keys.emplace_back(), limits.max_key_bytes, "a key"); };
  auto value = [&] { return c.blob(out.values.emplace_back(), limits.max_value_bytes, "a value"); };
  [&] {
    if (!c.u8(type)) return;
    if (type > kLastQueryType) return (void)c.fail("unknown query type " + std::to_string(type));
    out.type = static_cast<QueryType>(type);
    switch (out.type) {
      case QueryType::set:
        (void)(key() && value());
        return;
      case QueryType::compare_set:
        (void)(key() && value() && value());
        return;
      case QueryType::get:
      case QueryType::watch_key:
      case QueryType::delete_key:
        (void)key();
        return;
      case QueryType::add: {
        uint64_t delta = 0;
        if (key() && c.u64(delta)) out.delta = static_cast<int64_t>(delta);
        return;
      }
      case QueryType::check:
      case QueryType::wait: {
        uint64_t n = 0;
        if (!c.length(n, limits.max_keys, "a key count")) return;
        uint64_t total = 0;  // the keys together stay within one key's limit
        for (uint64_t i = 0; i < n; ++i) {
          if (!c.text(out.keys.emplace_back(), limits.max_key_bytes - total,
                      total == 0 ? "a key" : "a key (after keys of " + std::to_string(total) + " bytes in this query)")) {
            return;
          }
          total += out.keys.back().size();
        }
        return;
      }
      case QueryType::get_num_keys:
        return;
    }
  }();
  return c.result();
}

Bytes encode_query(const Query& query) {
  Bytes out;
  out.push_back(static_cast<uint8_t>(query.type));
  switch (query.type) {
    case QueryType::check:
    case QueryType::wait:
      append_u64(out, query.keys.size());
      for (const std::string& k : query.keys) append_blob(out, text_span(k));
      return out;
    case QueryType::get_num_keys:
      return out;
    case QueryType::add:
      append_blob(out, text_span(query.keys.at(0)));
      append_i64(out, query.delta);
      return out;
    default:
      append_blob(out, text_span(query.keys.at(0)));
      for (const Bytes& v : query.values) append_blob(out, v);
      return out;
  }
}

Decoded decode_watch_event(std::span<const uint8_t> buffer, const WireLimits& limits, WatchEvent& out) {
  Cursor c(buffer);
  out = WatchEvent{};
  uint8_t type = 0;
  [&] {
    if (!c.u8(type)) return;
    if (type > static_cast<uint8_t>(WatchResponse::callback_registered)) {
      return (void)c.fail("unknown watch message type " + std::to_string(type));
    }
    out.type = static_cast<WatchResponse>(type);
    if (out.type == WatchResponse::callback_registered) return;
    (void)(c.text(out.key, limits.max_key_bytes, "a key") && c.blob(out.old_value, limits.max_value_bytes, "a value") &&
           c.blob(out.new_value, limits.max_value_bytes, "a value"));
  }();
  return c.result();
}

Bytes encode_watch_event(const WatchEvent& event) {
  Bytes out;
  out.push_back(static_cast<uint8_t>(event.type));
  if (event.type == WatchResponse::callback_registered) return out;
  append_blob(out, text_span(event.key));
  append_blob(out, event.old_value);
  append_blob(out, event.new_value);
  return out;
}

}  // namespace dagsim::net::tcpstore

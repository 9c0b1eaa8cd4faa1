#include "core/store/store_service.h"

#include <charconv>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::store {

const char* store_op_name(StoreOp op) {
  switch (op) {
    case StoreOp::set: return "set";
    case StoreOp::get: return "get";
    case StoreOp::compare_set: return "compare_set";
    case StoreOp::add: return "add";
    case StoreOp::wait: return "wait";
    case StoreOp::check: return "check";
    case StoreOp::delete_key: return "delete_key";
    case StoreOp::num_keys: return "num_keys";
    case StoreOp::multi_get: return "multi_get";
    case StoreOp::multi_set: return "multi_set";
    case StoreOp::get_versioned: return "get_versioned";
    case StoreOp::compare_set_version: return "compare_set_version";
    case StoreOp::watch: return "watch";
  }
  return "?";
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size() && i < 8; ++i) out += (i > 0 ? ", " : "") + printable(keys[i], 80);
  if (keys.size() > 8) out += ", and " + std::to_string(keys.size() - 8) + " more";
  return out + "]";
}

namespace {

// The integer a key holds for add(): decimal text, as PyTorch's TCPStore keeps it.
int64_t integer_value(const std::string& key, const rpc::Bytes& value) {
  int64_t v = 0;
  const char* begin = reinterpret_cast<const char*>(value.data());
  const auto [end, ec] = std::from_chars(begin, begin + value.size(), v);
  if (ec != std::errc() || end != begin + value.size()) {
    throw errors::invalid_argument("store add: key " + printable(key, 80) + " does not hold an integer");
  }
  return v;
}

rpc::Bytes text_bytes(const std::string& s) { return rpc::Bytes(s.begin(), s.end()); }

}  // namespace

StoreService::StoreService(rpc::RpcAgent& agent) : agent_(agent) {
  agent_.add_handler(kStoreRequest, [this](WorkerId, const rpc::Bytes& payload) {
    return serve(rpc::from_bytes<StoreRequest>(payload));
  });
}

Versioned StoreService::lookup(const std::string& key) const {
  const auto it = data_.find(key);
  if (it == data_.end()) return {};
  return {it->second.value, it->second.version};
}

// Waiters check their condition under mutex_: a change is made and told under it too (see Note
// [wake-ups under the lock] in core/runtime/wait.h).
void StoreService::write(const std::string& key, rpc::Bytes value) {
  runtime::FiberLock lock(mutex_);
  Entry& e = data_[key];
  e.value = std::move(value);
  e.version = ++revision_;
  if (observer_) observer_(key, Versioned{e.value, e.version});
  changed_.notify_all();
}

bool StoreService::erase(const std::string& key) {
  runtime::FiberLock lock(mutex_);
  if (data_.erase(key) == 0) return false;
  ++revision_;
  if (observer_) observer_(key, Versioned{});
  changed_.notify_all();
  return true;
}

void StoreService::block_for_change(const StoreRequest& request, const std::function<bool()>& ready, const std::string& what) {
  if (request.timeout_ns < 0) throw errors::invalid_argument("store " + what + ": negative timeout");
  runtime::FiberLock lock(mutex_);
  const runtime::TimePoint deadline = agent_.env().clock.now() + Duration{request.timeout_ns};
  if (!runtime::block_until(changed_, lock, ready, deadline, "store.wait")) {
    throw errors::timed_out("store " + what + " timed out after " + std::to_string(request.timeout_ns / 1'000'000) + " ms");
  }
}

rpc::Bytes StoreService::serve(const StoreRequest& request) {
  if (request.op == 0 || request.op > kLastStoreOp) {
    throw errors::invalid_argument("store: unknown operation " + std::to_string(request.op));
  }
  const auto op = static_cast<StoreOp>(request.op);
  const std::vector<std::string>& keys = request.keys;
  auto need = [&](size_t n_keys, size_t n_values) {
    if (keys.size() != n_keys || request.values.size() != n_values) {
      throw errors::invalid_argument(std::string("store ") + store_op_name(op) + ": expected " + std::to_string(n_keys) +
                                     " key(s) and " + std::to_string(n_values) + " value(s)");
    }
  };
  auto at_least_one_key = [&] {
    throw errors::invalid_argument(std::string("store ") + store_op_name(op) + ": expected at least one key and no values");
  };
  auto all_present = [&] {
    for (const std::string& k : keys) {
      if (!data_.contains(k)) return false;
    }
    return true;
  };
  auto missing = [&] {
    std::vector<std::string> absent;
    for (const std::string& k : keys) {
      if (!data_.contains(k)) absent.push_back(k);
    }
    return absent;
  };
  StoreReply reply;
  // The versioned operations answer with the key's value and version after them.
  auto answer_with = [&](const std::string& key) {
    Versioned v = lookup(key);
    reply.values.push_back(std::move(v.value));
    reply.versions.push_back(v.version);
  };
  switch (op) {
    case StoreOp::set:
      need(1, 1);
      write(keys[0], request.values[0]);
      break;
    case StoreOp::get:
    case StoreOp::multi_get:
    case StoreOp::wait: {
      if (op == StoreOp::get) need(1, 0);
      if (keys.empty() || !request.values.empty()) at_least_one_key();
      if (!all_present()) {
        try {
          block_for_change(request, all_present, std::string(store_op_name(op)) + " for keys " + key_list(keys));
        } catch (const Error& e) {
          if (e.code() != ErrorCode::timed_out) throw;
          throw errors::timed_out(e.detail() + "; still missing: " + key_list(missing()));
        }
      }
      if (op != StoreOp::wait) {
        for (const std::string& k : keys) reply.values.push_back(data_.at(k).value);
      }
      break;
    }
    case StoreOp::compare_set: {
      need(1, 2);
      const auto it = data_.find(keys[0]);
      const rpc::Bytes& expected = request.values[0];
      if (it == data_.end()) {
        if (expected.empty()) write(keys[0], request.values[1]);
        reply.values.push_back(expected.empty() ? request.values[1] : expected);
      } else if (it->second.value == expected) {
        write(keys[0], request.values[1]);
        reply.values.push_back(request.values[1]);
      } else {
        reply.values.push_back(it->second.value);
      }
      break;
    }
    case StoreOp::add: {
      need(1, 0);
      const auto it = data_.find(keys[0]);
      const int64_t before = it == data_.end() ? 0 : integer_value(keys[0], it->second.value);
      int64_t sum = 0;
      if (__builtin_add_overflow(before, request.number, &sum)) {
        throw errors::invalid_argument("store add: key " + printable(keys[0], 80) + " would overflow int64");
      }
      write(keys[0], text_bytes(std::to_string(sum)));
      reply.number = sum;
      break;
    }
    case StoreOp::check:
      if (keys.empty() || !request.values.empty()) at_least_one_key();
      reply.flag = all_present();
      break;
    case StoreOp::delete_key:
      need(1, 0);
      reply.flag = erase(keys[0]);
      break;
    case StoreOp::num_keys:
      need(0, 0);
      reply.number = static_cast<int64_t>(data_.size());
      break;
    case StoreOp::multi_set:
      if (keys.empty() || keys.size() != request.values.size()) {
        throw errors::invalid_argument("store multi_set: expected as many values as keys, at least one");
      }
      for (size_t i = 0; i < keys.size(); ++i) write(keys[i], request.values[i]);
      break;
    case StoreOp::get_versioned: {
      need(1, 0);
      answer_with(keys[0]);
      break;
    }
    case StoreOp::compare_set_version: {
      need(1, 1);
      if (lookup(keys[0]).version == request.version) {
        write(keys[0], request.values[0]);
        reply.flag = true;
      }
      answer_with(keys[0]);
      break;
    }
    case StoreOp::watch: {
      need(1, 0);
      const std::string& key = keys[0];
      try {
        block_for_change(request, [&] { return lookup(key).version != request.version; }, "watch of key " + printable(key, 80));
      } catch (const Error& e) {
        // A quiet watch answers the unchanged key at its timeout (Store::watch_at_most).
        if (e.code() != ErrorCode::timed_out || request.number != kWatchQuietly) throw;
      }
      answer_with(key);
      break;
    }
  }
  return rpc::to_bytes(reply);
}

}  // namespace dagsim::store

// The restricted unpickler (restricted_unpickler.h): its bounds, each against the hostile pickle it
// is there for, and a real state of 1,000 nodes within them. States are written here opcode by
// opcode in the layout Python's pickler (protocol 4) gives a PyTorch 1.13 _RendezvousState.
#include "scenarios/workloads/rendezvous/restricted_unpickler.h"

#include <gtest/gtest.h>

#include <string>

#include "core/base/error.h"
#include "scenarios/workloads/rendezvous/pytorch_state.h"

namespace dagsim::scenarios {
namespace {

using namespace std::string_literals;

constexpr std::string_view kModule = "torch.distributed.elastic.rendezvous.dynamic_rendezvous";
constexpr PickleAllowedGlobal kAllowed[] = {{kModule, "_RendezvousState"}, {kModule, "_NodeDesc"}};

// A pickle, opcode by opcode.
struct Pickle {
  std::string b = "\x80\x04";
  Pickle& op(char c) {
    b.push_back(c);
    return *this;
  }
  Pickle& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  Pickle& str(std::string_view s) {  // SHORT_BINUNICODE or BINUNICODE, memoized as the pickler does
    if (s.size() < 256) {
      op('\x8c').op(static_cast<char>(s.size()));
    } else {
      op('X').u32(static_cast<uint32_t>(s.size()));
    }
    b += s;
    return op('\x94');
  }
  Pickle& get(uint32_t i) { return op('j').u32(i); }  // LONG_BINGET
  Pickle& integer(uint32_t v) { return op('J').u32(v); }
  std::vector<uint8_t> bytes() const { return {b.begin(), b.end()}; }
};

std::string error_of(const std::vector<uint8_t>& pickle) {
  try {
    (void)unpickle(pickle, kAllowed);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::protocol_error) << e.detail();
    return e.detail();
  }
  return "read";
}

// A complete round of `nodes` participants, each with a heartbeat, as Python pickles it: the memo
// numbers every string, class and container in order, and the heartbeats' keys are memo
// references to the participants' descriptors.
std::vector<uint8_t> pytorch_state(uint32_t nodes) {
  Pickle p;
  uint32_t memo = 0;  // the next memo index: every MEMOIZE takes one
  p.str(kModule).str("_RendezvousState").op('\x93').op('\x94');
  p.op(')').op('\x81').op('\x94').op('}').op('\x94').op('(');
  p.str("round").integer(7).str("complete").op('\x88').str("deadline").op('N').str("closed").op('\x89');
  p.str("participants").op('}').op('\x94').op('(');
  memo = 11;
  uint32_t node_class = 0, fqdn = 0, pid = 0, local_id = 0;
  std::vector<uint32_t> descs;
  for (uint32_t i = 0; i < nodes; ++i) {
    if (i == 0) {
      p.get(0).str("_NodeDesc").op('\x93').op('\x94');
      node_class = memo + 1;
      memo += 2;
    } else {
      p.get(node_class);
    }
    p.op(')').op('\x81').op('\x94').op('}').op('\x94').op('(');
    descs.push_back(memo);
    memo += 2;
    if (i == 0) {
      p.str("fqdn");
      fqdn = memo++;
    } else {
      p.get(fqdn);
    }
    p.str("node" + std::to_string(100000 + i) + ".cluster.example.com");
    ++memo;
    if (i == 0) {
      p.str("pid");
      pid = memo++;
    } else {
      p.get(pid);
    }
    p.integer(10000 + i);
    if (i == 0) {
      p.str("local_id");
      local_id = memo++;
    } else {
      p.get(local_id);
    }
    p.integer(0).op('u').op('b').integer(i);
  }
  p.op('u').str("wait_list").op('\x8f').op('\x94');
  p.str("last_heartbeats").op('}').op('\x94').op('(');
  memo += 4;
  uint32_t datetime = 0;
  for (uint32_t i = 0; i < nodes; ++i) {
    p.get(descs[i]);
    if (i == 0) {
      p.str("datetime").str("datetime").op('\x93').op('\x94');
      datetime = memo + 2;
      memo += 3;
    } else {
      p.get(datetime);
    }
    p.op('C').op('\x0a');
    p.b += "\x07\xea\x01\x01\x00\x00"s + static_cast<char>(i % 60) + "\x00\x00\x01"s;
    p.op('\x94').op('\x85').op('\x94').op('R').op('\x94');
    memo += 3;
  }
  p.op('u').op('u').op('b').op('.');
  return p.bytes();
}

TEST(RestrictedUnpickler, ARealStateOfAThousandNodesIsReadWithinItsBudget) {
  const std::vector<uint8_t> pickle = pytorch_state(1000);
  size_t decoded = 0;
  const PickleRef root = unpickle(pickle, kAllowed, &decoded);
  ASSERT_TRUE(std::holds_alternative<PickleObject>(root->v));
  EXPECT_LE(root->depth, 4u);
  // About 35 times the pickle (each descriptor counted again where the memo refers to it): well
  // within the budget, which a hostile pickle reaches at kPickleBytesPerInputByte.
  EXPECT_LT(decoded, 40 * pickle.size()) << decoded << " of " << pickle.size();
  EXPECT_LT(decoded, decoded_budget(pickle.size()) / 3);
  const rendezvous::RendezvousState s = decode_pytorch_pickle(pickle, 0);
  EXPECT_EQ(s.participants.size(), 1000u);
  EXPECT_EQ(s.last_heartbeats.size(), 1000u);
  EXPECT_EQ(s.round, 7u);
}

TEST(RestrictedUnpickler, NestingIsBoundedWhereverItComesFrom) {
  // A million nested 1-tuples (a 1 MB pickle): refused at the limit, and freed without recursing
  // deeper than it.
  std::string nest = "\x80\x04N" + std::string(1'000'000, '\x85') + ".";
  EXPECT_NE(error_of({nest.begin(), nest.end()}).find("nested deeper than 32 containers"), std::string::npos);
  // Exactly at the limit it reads.
  nest = "\x80\x04N" + std::string(kMaxPickleDepth, '\x85') + ".";
  EXPECT_EQ(error_of({nest.begin(), nest.end()}), "read");
  nest = "\x80\x04N" + std::string(kMaxPickleDepth + 1, '\x85') + ".";
  EXPECT_NE(error_of({nest.begin(), nest.end()}).find("nested deeper"), std::string::npos);
}

TEST(RestrictedUnpickler, AContainerDoesNotChangeOnceInsideAnother) {
  // A list put into a tuple, then appended to through the memo: the depth it was counted with
  // would no longer hold (a chain of such changes nests without bound).
  const std::string changed = "\x80\x04]\x94h\x00\x85h\x00"s + "Na.";
  EXPECT_NE(error_of({changed.begin(), changed.end()}).find("changed after it was put into another"), std::string::npos);
  // A list, dict or set put into itself.
  for (const std::string& self : {"\x80\x04]\x94h\x00"s + "a.", "\x80\x04}\x94Nh\x00"s + "s.", "\x80\x04\x8f\x94(h\x00\x90."s}) {
    EXPECT_NE(error_of({self.begin(), self.end()}).find("changed after"), std::string::npos) << self.size();
  }
}

TEST(RestrictedUnpickler, TheMemoGrowsOnlyInOrder) {
  // LONG_BINPUT at the memo's size + 4096: once the memo grew by 4,097 slots per 5 bytes.
  Pickle p;
  p.op('N').op('r').u32(4096).op('.');
  EXPECT_NE(error_of(p.bytes()).find("memo index 4096 skips past the 0 stored"), std::string::npos);
  Pickle in_order;
  in_order.op('N').op('r').u32(0).op('r').u32(0).op('q').op('\x01').op('.');
  EXPECT_EQ(error_of(in_order.bytes()), "read");
}

TEST(RestrictedUnpickler, MemoReferencesCountAgainstTheDecodedBudget) {
  // One 64 KiB string read back 100,000 times into lists (200 KB of BINGETs): each reference
  // counts the whole string, so this is refused long before 6.5 GB of it.
  Pickle p;
  p.str(std::string(65536, 'x')).op(']').op('\x94');
  for (int chunk = 0; chunk < 25; ++chunk) {
    p.op('(');
    for (int i = 0; i < 4000; ++i) p.op('h').op('\x00');
    p.op('e');
  }
  p.op('.');
  const std::string e = error_of(p.bytes());
  EXPECT_NE(e.find("decodes to more than"), std::string::npos) << e;
  EXPECT_NE(e.find("decoded-size limit"), std::string::npos) << e;
}

TEST(RestrictedUnpickler, TheBudgetIsAMultipleOfTheInputWithACeiling) {
  EXPECT_EQ(decoded_budget(0), kPickleDecodedFloor);
  EXPECT_EQ(decoded_budget(1000), 1000 * kPickleBytesPerInputByte + kPickleDecodedFloor);
  EXPECT_EQ(decoded_budget(kMaxStateBytes), kMaxPickleDecodedBytes);
  EXPECT_EQ(decoded_budget(SIZE_MAX), kMaxPickleDecodedBytes);
}

TEST(RestrictedUnpickler, ARefusedGlobalIsNamedWithItsControlCharactersEscaped) {
  const std::string hostile = "\x80\x04\x8c\x0bx\x1b]0;pwned\x07\x8c\x01y\x93.";
  const std::string e = error_of({hostile.begin(), hostile.end()});
  EXPECT_NE(e.find("refuses the global \"x\\u001b]0;pwned\\u0007.y\""), std::string::npos) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace dagsim::scenarios

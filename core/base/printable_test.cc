// Tests of printable(), quote() and key_name(): hostile strings stay one short, inert line.
#include "core/base/printable.h"

#include <gtest/gtest.h>

namespace dagsim {
namespace {

TEST(Printable, QuotesAndEscapesControlCharacters) {
  EXPECT_EQ(quote("worker1"), "\"worker1\"");
  EXPECT_EQ(quote("work\ner1"), "\"work\\ner1\"");
  EXPECT_EQ(quote("a\"b\\c\td"), "\"a\\\"b\\\\c\\td\"");
  EXPECT_EQ(quote("\x1b[31mred"), "\"\\u001b[31mred\"");
  EXPECT_EQ(quote(std::string_view("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(quote("\x7f"), "\"\\u007f\"");
  EXPECT_EQ(quote("héllo"), "\"héllo\"");  // UTF-8 passes through
}

TEST(Printable, CutsLongStringsWithTheirLength) {
  const std::string key(1'000'000, 'k');
  const std::string shown = quote(key);
  EXPECT_EQ(shown, "\"" + std::string(kPrintableMax, 'k') + "...\" (1000000 bytes)");
  EXPECT_EQ(quote("abcdef", 3), "\"abc...\" (6 bytes)");
  // Never inside a UTF-8 character: "é" is two bytes, cut before it.
  EXPECT_EQ(quote("abé", 3), "\"ab...\" (4 bytes)");
}

TEST(Printable, PathsPrintBareUnlessTheyNeedEscaping) {
  EXPECT_EQ(printable("scenarios/examples/a b.toml"), "scenarios/examples/a b.toml");
  EXPECT_EQ(printable("bad\nname.toml"), "\"bad\\nname.toml\"");
  EXPECT_EQ(printable(""), "\"\"");
}

TEST(Printable, KeysAreBareOnlyWhenTomlWouldAcceptThemBare) {
  EXPECT_EQ(key_name("restart_at_ms"), "restart_at_ms");
  EXPECT_EQ(key_name("node-1"), "node-1");
  EXPECT_EQ(key_name("a: b"), "\"a: b\"");
  EXPECT_EQ(key_name("a.b"), "\"a.b\"");
  EXPECT_EQ(key_name(""), "\"\"");
  EXPECT_EQ(key_name(std::string(200, 'k')), "\"" + std::string(kPrintableMax, 'k') + "...\" (200 bytes)");
}

TEST(Counted, OneIsSingularEveryOtherCountPlural) {
  EXPECT_EQ(counted(1, "restart"), "1 restart");
  EXPECT_EQ(counted(0, "restart"), "0 restarts");
  EXPECT_EQ(counted(3, "violation"), "3 violations");
  EXPECT_EQ(counted(2, "process", "processes"), "2 processes");
  EXPECT_EQ(counted(1, "process", "processes"), "1 process");
}

}  // namespace
}  // namespace dagsim

// tensor_report.h: torch.allclose's rule for non-finite values, and report JSON that round-trips
// them and summarises large tensors.
#include "scenarios/workloads/program/tensor_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/tensor/ops.h"
#include "scenarios/run/records.h"

namespace dagsim::scenarios {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::nan("");

Tensor vec(std::vector<double> v) { return from_values({static_cast<int64_t>(v.size())}, v, Dtype::float64); }

bool close(std::vector<double> a, std::vector<double> b, bool equal_nan) {
  double worst = 0;
  return tensors_allclose(vec(std::move(a)), vec(std::move(b)), 1e-9, 1e-12, equal_nan, worst);
}

TEST(TensorReport, AllcloseTreatsNonFiniteValuesAsTorchDoes) {
  // inf equals inf of the same sign, with or without equal_nan (as torch.allclose).
  EXPECT_TRUE(close({-kInf, -1, kInf}, {-kInf, -1, kInf}, false));
  EXPECT_FALSE(close({kInf}, {-kInf}, true));
  EXPECT_FALSE(close({kInf}, {1e308}, true));
  EXPECT_FALSE(close({1}, {kInf}, true));
  // NaN equals NaN only with equal_nan, and never a number.
  EXPECT_TRUE(close({kNan, 0}, {kNan, 0}, true));
  EXPECT_FALSE(close({kNan, 0}, {kNan, 0}, false));
  EXPECT_FALSE(close({kNan}, {0}, true));
  EXPECT_FALSE(close({0}, {kNan}, true));
  // Finite values keep the tolerance rule.
  EXPECT_TRUE(close({1.0 + 1e-10}, {1.0}, false));
  EXPECT_FALSE(close({1.0 + 1e-8}, {1.0}, false));
  double worst = 0;
  EXPECT_FALSE(tensors_allclose(vec({1, kInf}), vec({1, 2}), 0, 0, true, worst));
  EXPECT_EQ(worst, kInf);
}

TEST(TensorReport, NonFiniteValuesRoundTripThroughReportJson) {
  const Tensor t = from_values({2, 2}, {kInf, -kInf, kNan, 1.5}, Dtype::float64);
  const nlohmann::json j = nlohmann::json::parse(tensor_report_json(t, false).dump());
  ASSERT_EQ(j.dump(), R"([["inf","-inf"],["nan",1.5]])");
  EXPECT_EQ(number_from_record(j[0][0], "x"), kInf);
  EXPECT_EQ(number_from_record(j[0][1], "x"), -kInf);
  EXPECT_TRUE(std::isnan(number_from_record(j[1][0], "x")));
  EXPECT_EQ(number_from_record(j[1][1], "x"), 1.5);
  EXPECT_EQ(tensor_report_json(from_values({}, {kNan}, Dtype::float64), false).dump(), R"("nan")");
  EXPECT_EQ(tensor_report_json(from_values({2, 0}, {}, Dtype::float64), false).dump(), "[[],[]]");
}

TEST(TensorReport, LargeTensorsAreSummarisedUnlessAskedInFull) {
  std::vector<double> values(kReportFullTensorMax + 1, 2.0);
  values[1] = -1.0;
  values[2] = kNan;
  const Tensor t = vec(values);
  const nlohmann::json s = tensor_report_json(t, false);
  EXPECT_EQ(s.at("summary"), true);
  EXPECT_EQ(s.at("numel"), kReportFullTensorMax + 1);
  EXPECT_EQ(s.at("first").size(), 8u);
  EXPECT_EQ(s.at("first")[2], "nan");
  EXPECT_EQ(s.at("min"), -1.0);
  EXPECT_EQ(s.at("max"), 2.0);
  EXPECT_EQ(s.at("nonfinite"), 1);
  // The digest tells tensors apart by every value.
  values[900] = 2.5;
  EXPECT_NE(tensor_report_json(vec(values), false).at("digest"), s.at("digest"));
  EXPECT_EQ(tensor_report_json(t, true).size(), static_cast<size_t>(kReportFullTensorMax + 1));
  EXPECT_TRUE(tensor_report_json(vec(std::vector<double>(kReportFullTensorMax, 1.0)), false).is_array());
}

}  // namespace
}  // namespace dagsim::scenarios

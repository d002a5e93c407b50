#include "util/progress.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace ds {

TEST(Progress, DurationFormat) {
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(65), "01:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
}

TEST(Progress, BarShowsFractionEtaAndStats) {
  ProgressReporter p({100, ProgressMode::Off, 10, stdout});
  ProgressStats s{25, 2.5, 1e-3, 1234.0, 1 << 20};
  auto bar = p.render_bar(s, 10.0);
  EXPECT_NE(bar.find(" 25%|"), std::string::npos) << bar;
  EXPECT_NE(bar.find("25/100"), std::string::npos) << bar;
  EXPECT_NE(bar.find("[00:10<00:30"), std::string::npos) << bar;  // 10 s for 25 steps → 30 s left
  EXPECT_NE(bar.find("loss=2.5000"), std::string::npos) << bar;
  EXPECT_NE(bar.find("mem=1.00 MiB"), std::string::npos) << bar;
}

TEST(Progress, LinesModeNeverWritesCarriageReturns) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressReporter p({4, ProgressMode::Lines, 2, f});
    for (int i = 1; i <= 4; ++i) p.update({i, 1.0, 0.1, 10.0, 0});
  }
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text.push_back(static_cast<char>(c));
  std::fclose(f);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  // Steps 1, 2 and 4 are printed (first, every 2nd, last).
  EXPECT_NE(text.find("step 1/4"), std::string::npos) << text;
  EXPECT_NE(text.find("step 2/4"), std::string::npos) << text;
  EXPECT_EQ(text.find("step 3/4"), std::string::npos) << text;
  EXPECT_NE(text.find("step 4/4"), std::string::npos) << text;
}

}  // namespace ds

// Hostfile parsing (see hostfile.h for the format and where it comes from).
#include "launcher/hostfile.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace ds::launcher {
namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// `^(\S+)\s+slots=(\d+)` on a stripped line. Like DeepSpeed's re.search, text after the digits is
// ignored, so Open MPI hostfiles with `max_slots=8` after the slot count still load.
bool match_entry(std::string_view line, HostEntry& out) {
  size_t i = 0;
  while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  if (i == 0 || i == line.size()) return false;
  std::string_view host = line.substr(0, i);
  while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  constexpr std::string_view kSlots = "slots=";
  if (line.substr(i, kSlots.size()) != kSlots) return false;
  i += kSlots.size();
  const size_t digits_begin = i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i == digits_begin) return false;
  const std::string_view digits = line.substr(digits_begin, i - digits_begin);
  if (digits.size() > 6) return false;  // no machine has a million slots; avoids int overflow
  out.host = std::string(host);
  out.slots = std::stoi(std::string(digits));
  return true;
}

}  // namespace

ResourcePool parse_hostfile(std::string_view text, const std::string& source) {
  ResourcePool pool;
  std::istringstream in{std::string(text)};
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string_view line = strip(raw);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    HostEntry entry;
    DS_CHECK(match_entry(line, entry), Error,
             where + "Hostfile contains a bad entry: '" + std::string(line) +
                 "' (expected '<hostname> slots=<n>', e.g. 'worker-0 slots=4'), unable to proceed with launching");
    // DeepSpeed takes 0 and then starts nothing there without saying so: a clear error instead.
    DS_CHECK(entry.slots > 0, Error,
             where + "Hostfile gives " + entry.host + " 0 slots, unable to proceed with launching (give it at least "
                     "one slot, or comment the line out with '#')");
    for (const HostEntry& seen : pool)
      DS_CHECK(seen.host != entry.host, Error,
               where + "Hostfile contains multiple entries for " + entry.host +
                   ", unable to proceed with launching (list each host once with its total slots)");
    pool.push_back(std::move(entry));
  }
  DS_CHECK(!pool.empty(), Error,
           source + ": Hostfile is empty or not formatted correctly, unable to proceed with launching "
                    "(add lines like 'worker-0 slots=4', or remove the file to run on localhost)");
  return pool;
}

std::optional<ResourcePool> read_hostfile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream file(path);
  DS_CHECK(file.good(), Error, path + ": cannot read the hostfile (check its permissions)");
  std::stringstream text;
  text << file.rdbuf();
  return parse_hostfile(text.str(), path);
}

}  // namespace ds::launcher

// A small well-formedness check for the XML the program writes (SVG charts): elements close
// in order, there is one root, attribute values are quoted, and no '<' or bare '&' appears
// in text or attribute values. No DTDs or CDATA: the writers never emit them.
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::test {

// "" when well-formed, else what is wrong and at which byte.
inline std::string xml_problem(std::string_view s) {
  size_t i = 0;
  auto at = [&](const std::string& what) { return what + " at byte " + std::to_string(i); };
  auto name_char = [](char c) { return std::isalnum((unsigned char)c) || c == '_' || c == ':' || c == '-' || c == '.'; };
  auto read_name = [&] {
    const size_t start = i;
    while (i < s.size() && name_char(s[i])) ++i;
    return std::string(s.substr(start, i - start));
  };
  // Character data from i up to `stop`: every '&' starts an entity.
  auto check_text = [&](size_t stop) -> std::string {
    for (; i < stop; ++i) {
      if (s[i] == '<') return at("'<' in text or attribute");
      if (s[i] != '&') continue;
      const size_t semi = s.find(';', i);
      const std::string_view e = s.substr(i + 1, semi == std::string_view::npos ? 0 : semi - i - 1);
      if (semi > stop || !(e == "amp" || e == "lt" || e == "gt" || e == "quot" || e == "apos" || (!e.empty() && e[0] == '#')))
        return at("bare '&'");
    }
    return "";
  };
  auto skip_space = [&] { while (i < s.size() && std::isspace((unsigned char)s[i])) ++i; };

  if (s.starts_with("<?xml")) {
    i = s.find("?>");
    if (i == std::string_view::npos) return "unterminated XML declaration";
    i += 2;
  }
  std::vector<std::string> open;
  int roots = 0;
  while (i < s.size()) {
    const size_t lt = s.find('<', i);
    const size_t text_end = lt == std::string_view::npos ? s.size() : lt;
    if (open.empty() && s.substr(i, text_end - i).find_first_not_of(" \t\r\n") != std::string_view::npos)
      return at("text outside the root element");
    if (std::string e = check_text(text_end); !e.empty()) return e;
    if (lt == std::string_view::npos) break;
    i = lt + 1;
    if (s.substr(i).starts_with("!--")) {
      const size_t end = s.find("-->", i);
      if (end == std::string_view::npos) return at("unterminated comment");
      i = end + 3;
      continue;
    }
    if (i < s.size() && s[i] == '/') {
      ++i;
      const std::string name = read_name();
      skip_space();
      if (i >= s.size() || s[i] != '>') return at("malformed closing tag </" + name);
      if (open.empty() || open.back() != name) return at("</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">"));
      open.pop_back();
      ++i;
      continue;
    }
    const std::string name = read_name();
    if (name.empty()) return at("'<' not starting a tag");
    if (open.empty() && ++roots > 1) return at("a second root element <" + name + ">");
    for (;;) {
      skip_space();
      if (i >= s.size()) return "document ends inside <" + name + ">";
      if (s.substr(i).starts_with("/>")) {
        i += 2;
        break;
      }
      if (s[i] == '>') {
        ++i;
        open.push_back(name);
        break;
      }
      const std::string attr = read_name();
      if (attr.empty()) return at("malformed attribute in <" + name + ">");
      skip_space();
      if (i >= s.size() || s[i] != '=') return at("attribute " + attr + " without a value");
      ++i;
      skip_space();
      if (i >= s.size() || (s[i] != '"' && s[i] != '\'')) return at("unquoted attribute " + attr);
      const char quote = s[i++];
      const size_t end = s.find(quote, i);
      if (end == std::string_view::npos) return at("unterminated attribute " + attr);
      if (std::string e = check_text(end); !e.empty()) return e;
      i = end + 1;
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (roots == 0) return "no root element";
  return "";
}

}  // namespace brigade::test

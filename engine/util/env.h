// A setting read from the environment that takes one of a few words.
#pragma once

#include <initializer_list>
#include <string>

namespace brigade {

// The value of environment variable `name`, the first of `choices` where it is unset; anything
// else is a UserError ("NAME is 'x'; expected a, b or c"). Callers keep it in a static: the
// environment is read once.
std::string env_choice(const char* name, std::initializer_list<const char*> choices);

}  // namespace brigade

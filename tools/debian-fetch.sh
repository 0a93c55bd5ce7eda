# Sourced by the install scripts: downloads Debian packages of another suite into a folder,
# with apt running on a private source list, state and cache, so the machine's apt sources
# and packages stay as they are. The archive is the one the machine's own bookworm source
# names (whatever mirror that is); apt checks each package against the suite's signed index.
#   debian_fetch SUITE DIR PACKAGE...   returns non-zero (apt's log on stderr) when it cannot
#   debian_fetch --with-depends SUITE DIR PACKAGE...
#     the packages and every package they depend on, as apt would install them on an empty
#     system (recommendations left out): what unpacks into a userland that runs them.
debian_fetch() {
  local closure=0 archive work
  [ "$1" = --with-depends ] && { closure=1; shift; }
  local suite=$1 out=$2
  shift 2
  archive=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' 2>/dev/null |
              awk '$2 == "bookworm" && $3 == "deb" { print $1; exit }')
  if [ -z "$archive" ]; then
    echo "apt has no Debian bookworm source to find $suite's archive by" >&2
    return 1
  fi
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$out"
  echo "deb $archive $suite main" >"$work/sources.list"
  : >"$work/status"
  local apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
                  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
                  -o "Dir::State::status=$work/status" -o "APT::Install-Recommends=0"
                  -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)" -qq)
  local packages=("${@/%//$suite}")
  # With --with-depends, the packages installing them would unpack, against the empty package
  # list above (none: apt could not resolve them).
  if ! apt-get "${apt_opts[@]}" update >"$work/apt.log" 2>&1 ||
     { [ $closure = 1 ] &&
       mapfile -t packages < <(apt-get "${apt_opts[@]}" -s install "${packages[@]}" 2>>"$work/apt.log" |
                                 awk '$1 == "Inst" { print $2 }') &&
       [ ${#packages[@]} = 0 ]; } ||
     ! (cd "$out" && apt-get "${apt_opts[@]}" download "${packages[@]}" >>"$work/apt.log" 2>&1); then
    cat "$work/apt.log" >&2
    rm -rf "$work"
    return 1
  fi
  rm -rf "$work"
}

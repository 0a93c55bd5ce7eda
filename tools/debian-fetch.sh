# Sourced by the install scripts: downloads Debian packages of another suite into a folder,
# with apt running on a private source list, state and cache, so the machine's apt sources
# and packages stay as they are. The archive is the one the machine's own bookworm source
# names (whatever mirror that is); apt checks each package against the suite's signed index.
#   debian_fetch SUITE DIR PACKAGE...   returns non-zero (apt's log on stderr) when it cannot
debian_fetch() {
  local suite=$1 out=$2 archive work
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
  local apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
                  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
                  -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)" -qq)
  if ! apt-get "${apt_opts[@]}" update >"$work/apt.log" 2>&1 ||
     ! (cd "$out" && apt-get "${apt_opts[@]}" download "${@/%//$suite}" >>"$work/apt.log" 2>&1); then
    cat "$work/apt.log" >&2
    rm -rf "$work"
    return 1
  fi
  rm -rf "$work"
}

# Sourced by each language's build.sh (with `here` set to the language's folder and the
# script's arguments passed on). Sets:
#   out  where the components go: the plugin folders themselves, or OUT/<plugin>/ (with a copy
#        of the manifest, so OUT is a plugin directory to load) when build.sh is given OUT;
#   wit  a temporary WIT folder: the worlds of path-guard (`pre-tool` and `prepare`) and
#        tool-tally (two points) with the palisade:hooks package under deps/hooks/ (removed
#        when the script exits).
out="${1:-$here}"
for plugin in path-guard tool-tally; do
    mkdir -p "$out/$plugin"
    [ "$out" = "$here" ] || cp "$here/$plugin/plugin.toml" "$out/$plugin/"
done
wit="$(mktemp -d)"
trap 'rm -rf "$wit"' EXIT
mkdir -p "$wit/deps/hooks"
cp "$here/../../../wit/"*.wit "$wit/deps/hooks/"
cp "$here/../path-guard.wit" "$here/../tool-tally.wit" "$wit/"

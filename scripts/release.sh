#!/usr/bin/env bash
# release.sh VERSION [--dry-run]: tag a release of cqlseq (make release).
#
# It checks, and refuses with the reason, unless: VERSION is vMAJOR.MINOR.PATCH; the work
# tree is clean; the tag does not exist; CHANGELOG.md has a "## [MAJOR.MINOR.PATCH] -
# YYYY-MM-DD" section with at least one entry, below "## [Unreleased]"; cqlseq built with
# the version (-ldflags -X) reports it (cqlseq version). Then it tags HEAD (annotated, the
# changelog section as the message). --dry-run does every check and prints the message
# without tagging. Pushing the tag is left to the maintainer (git push origin VERSION).
set -euo pipefail

die() { echo "release: $*" >&2; exit 1; }

version=${1:-}
dry=${2:-}
[[ $version =~ ^v([0-9]+\.[0-9]+\.[0-9]+)$ ]] || die "VERSION=$version: want vMAJOR.MINOR.PATCH (make release VERSION=v0.1.0)"
num=${BASH_REMATCH[1]}
cd "$(git rev-parse --show-toplevel)"

[[ -z $(git status --porcelain) ]] || die "the work tree has changes: commit or stash them first"
! git rev-parse -q --verify "refs/tags/$version" >/dev/null || die "tag $version exists already"

grep -q '^## \[Unreleased\]' CHANGELOG.md || die "CHANGELOG.md has no '## [Unreleased]' section"
head=$(grep -nE "^## \[$num\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" CHANGELOG.md | head -1 | cut -d: -f1) ||
  true
[[ -n $head ]] || die "CHANGELOG.md has no '## [$num] - YYYY-MM-DD' section: move the Unreleased entries under it"
unrel=$(grep -n '^## \[Unreleased\]' CHANGELOG.md | cut -d: -f1)
(( unrel < head )) || die "CHANGELOG.md: '## [Unreleased]' must come before '## [$num]'"
notes=$(awk -v h="$head" 'NR > h && /^## \[/ { exit } NR > h { print }' CHANGELOG.md)
grep -q '^- ' <<<"$notes" || die "CHANGELOG.md's [$num] section has no entry"

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -ldflags "-X github.com/cqlseq/cqlseq/cmd/cqlseq/internal/cli.version=$version" -o "$bin/cqlseq" ./cmd/cqlseq
got=$("$bin/cqlseq" version)
[[ $got == "cqlseq $version "* ]] || die "cqlseq version printed '$got', want 'cqlseq $version ...'"

msg=$(printf 'cqlseq %s\n\n%s\n' "$version" "$notes")
if [[ $dry == --dry-run ]]; then
  echo "release: $version checks passed; would tag $(git rev-parse --short HEAD) with:"
  echo "$msg"
  exit 0
fi
git tag -a "$version" -m "$msg"
echo "release: tagged $(git rev-parse --short HEAD) as $version (cqlseq version: $got); push it with: git push origin $version"

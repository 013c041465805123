#!/bin/sh
# The system packages `make test` needs, checked before the suite starts (the Makefile's
# system-packages target): Debian's chromium and chromium-driver (the browser tests of the HTML
# report and Phoenix's UI, tests/browser.py) and prometheus (its prometheus and promtool binaries,
# for the tests against a real Prometheus).
#
# All there: nothing happens (a few file tests, no apt). Some missing, running as root where
# apt-get is: they are installed, with `apt-get update` first only when apt doesn't know a package
# or the install fails on stale lists. Else: one line saying what to install, and exit status 1,
# before anything else runs.
#
# SYSTEM_PACKAGES_BIN (default /usr/bin, where Debian puts them and where the tests look) is the
# directory checked; tests/test_system_packages.py points it elsewhere, and puts its own `id` and
# `apt-get` first on PATH, to try every branch without touching this machine.
set -eu

bin=${SYSTEM_PACKAGES_BIN:-/usr/bin}
# binary:package, in the order of the message
wanted="chromium:chromium chromedriver:chromium-driver prometheus:prometheus promtool:prometheus"

missing_binaries() {
    for pair in $wanted; do
        [ -x "$bin/${pair%%:*}" ] || printf '%s ' "${pair%%:*}"
    done
}

packages_for() {
    found=""
    for pair in $wanted; do
        case " $1 " in *" ${pair%%:*} "*)
            case " $found " in *" ${pair#*:} "*) ;; *) found="$found ${pair#*:}" ;; esac ;;
        esac
    done
    printf '%s' "${found# }"
}

missing=$(missing_binaries)
[ -z "$missing" ] && exit 0
packages=$(packages_for "$missing")

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "make test: installing $packages (Debian packages, for the browser and Prometheus tests)" >&2
    updated=no
    for package in $packages; do
        if ! apt-cache show "$package" >/dev/null 2>&1; then
            apt-get update -qq
            updated=yes
            break
        fi
    done
    apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null; }
    if ! apt_install; then
        [ "$updated" = no ] || exit 1
        apt-get update -qq && apt_install
    fi
    missing=$(missing_binaries)
    [ -z "$missing" ] && exit 0
    echo "make test: $packages installed, yet ${missing% } still missing from $bin" >&2
    exit 1
fi

echo "make test needs ${missing% } in $bin: install Debian's $packages (as root: apt-get install $packages), then run make test again" >&2
exit 1

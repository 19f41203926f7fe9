# Sourced by scripts/install and scripts/uninstall: their shared flags, and where
# each file goes. The directories other programs search (dbus-daemon, polkit,
# systemd, WirePlumber) come from their pkg-config files, whatever the prefix, as
# meson and autotools projects do; each can be overridden (tests install into a
# temporary directory). Sets PREFIX, DESTDIR, SYSCONFDIR, LOCALSTATEDIR, BUILD_DIR,
# DESKTOP_BUILD_DIR, DESKTOP (yes, or no for --no-desktop) and the *_DIR variables
# below; MANIFEST is the list of what was installed.

usage() {
    cat <<EOF
Usage: $(basename "$0") [OPTIONS]

  --prefix P                   default /usr/local. The files other programs read
                               (bus policy and activation file, polkit action,
                               units, WirePlumber drop-ins) go where those programs
                               look, outside P (the directories below); a trial
                               install keeps them out of the system with --destdir
                               or those options, and uninstall takes the same flags
  --destdir D                  stage everything under D (packaging); paths written
                               into the files stay those without D
  --sysconfdir S               default /etc: the configuration is S/permissions
  --localstatedir V            default /var: the decisions are in V/lib/permissions
  --dbus-system-policy-dir DIR default: dbus-1's datadir/dbus-1/system.d
  --dbus-system-services-dir DIR
                               default: dbus-1's system_bus_services_dir
  --polkit-actions-dir DIR     default: polkit-gobject-1's policydir
                               (/usr/share/polkit-1/actions without it)
  --systemd-unit-dir DIR       default: systemd's systemdsystemunitdir
  --wireplumber-data-dir DIR   default: WirePlumber's data directory, its .pc
                               file's prefix/share/wireplumber (wireplumber-0.5,
                               else wireplumber-0.4; /usr/share/wireplumber without)
EOF
    [ "$(basename "$0")" = install ] && cat <<EOF
  --build-dir DIR              install what a release build already put in DIR
                               (swift build -c release --show-bin-path) instead of
                               building; with it, --desktop-build-dir or --no-desktop
  --desktop-build-dir DIR      the same for the desktop programs (Desktop/: swift build
                               --package-path Desktop -c release --show-bin-path)
EOF
    cat <<EOF
  --no-desktop                 a server install: neither builds nor installs the
                               desktop programs (Desktop/, on GTK 4 and libadwaita),
                               so that no GTK package is needed (scripts/install-deps
                               --no-desktop); uninstall takes it too, and removes what
                               the manifest lists either way
EOF
    return 0
}

PREFIX=/usr/local
DESTDIR=
SYSCONFDIR=/etc
LOCALSTATEDIR=/var
BUILD_DIR=
DESKTOP_BUILD_DIR=
DESKTOP=yes
DBUS_POLICY_DIR=
DBUS_SERVICES_DIR=
POLKIT_DIR=
UNIT_DIR=
WIREPLUMBER_DIR=

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=${2:?--prefix needs a value}; shift 2 ;;
        --destdir) DESTDIR=${2:?--destdir needs a value}; shift 2 ;;
        --sysconfdir) SYSCONFDIR=${2:?--sysconfdir needs a value}; shift 2 ;;
        --localstatedir) LOCALSTATEDIR=${2:?--localstatedir needs a value}; shift 2 ;;
        --dbus-system-policy-dir) DBUS_POLICY_DIR=${2:?$1 needs a value}; shift 2 ;;
        --dbus-system-services-dir) DBUS_SERVICES_DIR=${2:?$1 needs a value}; shift 2 ;;
        --polkit-actions-dir) POLKIT_DIR=${2:?$1 needs a value}; shift 2 ;;
        --systemd-unit-dir) UNIT_DIR=${2:?$1 needs a value}; shift 2 ;;
        --wireplumber-data-dir) WIREPLUMBER_DIR=${2:?$1 needs a value}; shift 2 ;;
        --build-dir) [ "$(basename "$0")" = install ] || { usage >&2; exit 2; }
                     BUILD_DIR=${2:?--build-dir needs a value}; shift 2 ;;
        --desktop-build-dir) [ "$(basename "$0")" = install ] || { usage >&2; exit 2; }
                     DESKTOP_BUILD_DIR=${2:?--desktop-build-dir needs a value}; shift 2 ;;
        --no-desktop) DESKTOP=no; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "$(basename "$0"): unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done

for dir in "$PREFIX" "$SYSCONFDIR" "$LOCALSTATEDIR"; do
    case "$dir" in /*) ;; *) echo "$(basename "$0"): $dir: not an absolute path" >&2; exit 2 ;; esac
done
PREFIX=${PREFIX%/}; SYSCONFDIR=${SYSCONFDIR%/}; LOCALSTATEDIR=${LOCALSTATEDIR%/}
[ -n "$PREFIX" ] || PREFIX=/

pkgvar() {  # pkgvar PACKAGE VARIABLE: empty when the package's .pc is missing
    pkg-config --variable="$2" "$1" 2>/dev/null || true
}
if [ -z "$DBUS_POLICY_DIR" ]; then
    datadir=$(pkgvar dbus-1 datadir)
    DBUS_POLICY_DIR=${datadir:-/usr/share}/dbus-1/system.d
fi
if [ -z "$DBUS_SERVICES_DIR" ]; then
    DBUS_SERVICES_DIR=$(pkgvar dbus-1 system_bus_services_dir)
    DBUS_SERVICES_DIR=${DBUS_SERVICES_DIR:-/usr/share/dbus-1/system-services}
fi
if [ -z "$POLKIT_DIR" ]; then
    POLKIT_DIR=$(pkgvar polkit-gobject-1 policydir)
    POLKIT_DIR=${POLKIT_DIR:-/usr/share/polkit-1/actions}
fi
if [ -z "$UNIT_DIR" ]; then
    UNIT_DIR=$(pkgvar systemd systemdsystemunitdir)
    UNIT_DIR=${UNIT_DIR:-/lib/systemd/system}
fi
# WirePlumber reads its drop-ins from the data directory it was built with (and
# /etc/wireplumber, ~/.config/wireplumber), never from another prefix's share/:
# the one directory serves 0.4 (main.lua.d/) and 0.5 (wireplumber.conf.d/).
if [ -z "$WIREPLUMBER_DIR" ]; then
    wireplumber_prefix=$(pkgvar wireplumber-0.5 prefix)
    [ -n "$wireplumber_prefix" ] || wireplumber_prefix=$(pkgvar wireplumber-0.4 prefix)
    WIREPLUMBER_DIR=${wireplumber_prefix:-/usr}/share/wireplumber
fi

LIBEXEC_DIR=$PREFIX/libexec
BIN_DIR=$PREFIX/bin
# The Swift runtime the installed programs share, and the plugins below it.
LIB_DIR=$PREFIX/lib/permissions
PLUGIN_DIR=$LIB_DIR/plugins
INCLUDE_DIR=$PREFIX/include/permissions
PKGCONFIG_DIR=$PREFIX/lib/pkgconfig
SHARE_DIR=$PREFIX/share/permissions
INTERFACES_DIR=$PREFIX/share/dbus-1/interfaces
MAN_DIR=$PREFIX/share/man
# The desktop programs' entries: the agent's desktop file where desktops look for
# applications, and its autostart entry beside the other files under S (S/xdg is
# XDG_CONFIG_DIRS' default, whatever P is).
APPLICATIONS_DIR=$PREFIX/share/applications
AUTOSTART_DIR=$SYSCONFDIR/xdg/autostart
# The settings page: D-Bus activated on the session bus (the session bus's service
# directory under P/share, which dbus-daemon reads through XDG_DATA_DIRS), and its
# icon in the hicolor theme.
SESSION_SERVICES_DIR=$PREFIX/share/dbus-1/services
ICONS_DIR=$PREFIX/share/icons/hicolor/scalable/apps
CONFIG_DIR=$SYSCONFDIR/permissions
STATE_DIR=$LOCALSTATEDIR/lib/permissions
MANIFEST=$SHARE_DIR/install-manifest

# The daemon this install runs, on the system bus (DBUS_SYSTEM_BUS_ADDRESS, else the
# standard one). With systemd as init it is the unit's; without, it is found by its
# bus name's PID, and counts only when /proc/PID/exe is this install's permissionsd
# (another install's daemon, or another program holding the name, is left alone).
# Nothing of this runs with --destdir: a staged install serves nothing.
SERVICE_NAME=org.example.Permissions

has_systemd() { [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; }

# Prints the PID of this install's running daemon; fails when there is none.
running_daemon_pid() {
    [ -z "$DESTDIR" ] || return 1
    local pid exe
    pid=$(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
              GetConnectionUnixProcessID s "$SERVICE_NAME" 2>/dev/null | awk '$1 == "u" { print $2 }') || return 1
    [ -n "$pid" ] || return 1
    # An upgrade has replaced the file under the running process: the kernel marks it.
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    [ "${exe% (deleted)}" = "$LIBEXEC_DIR/permissionsd" ] || return 1
    echo "$pid"
}

# Whether the process has ended: gone, or a zombie its parent has not reaped yet.
process_ended() {
    local state
    state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}

# The connector (permissionsd-connector) of this install: with systemd, its units;
# without, the processes running this install's binary (/proc/PID/exe, "(deleted)"
# once an upgrade has replaced the file), which whoever started them runs.
CONNECTOR=$LIBEXEC_DIR/permissionsd-connector

# Prints the PIDs of this install's running connectors, one a line.
running_connector_pids() {
    [ -z "$DESTDIR" ] || return 0
    local exe pid
    for exe in /proc/[0-9]*/exe; do
        pid=${exe#/proc/}; pid=${pid%/exe}
        case "$(readlink "$exe" 2>/dev/null || true)" in
            "$CONNECTOR"|"$CONNECTOR (deleted)") echo "$pid" ;;
        esac
    done
}

# Stops the connector: its units through systemd where it runs, else SIGTERM to
# each process of this install's, waiting (up to 5 s) until each has ended.
stop_running_connector() {
    if has_systemd; then
        systemctl stop permissionsd-connector.socket permissionsd-connector.service 2>/dev/null || true
        return 0
    fi
    local pid
    for pid in $(running_connector_pids); do
        kill -TERM "$pid" 2>/dev/null || continue
        stopped_within 5 "permissionsd-connector (pid $pid)" process_ended "$pid" || return 1
    done
}

# stopped_within SECONDS WHAT COMMAND...: waits until COMMAND succeeds, for up to
# SECONDS, then says that WHAT stopped; or that it did not, and fails.
stopped_within() {
    local seconds=$1 what=$2 deadline=$((SECONDS + $1))
    shift 2
    until "$@"; do
        if [ $SECONDS -ge $deadline ]; then
            echo "$(basename "$0"): $what did not stop within $seconds s" >&2
            return 1
        fi
        sleep 0.05  # polling a process that is not our child, with a deadline
    done
    echo "$(basename "$0"): stopped $what" >&2
}

# Whether the daemon PID has ended and the name is free.
daemon_gone() {
    process_ended "$1" &&
        [ "$(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
                NameHasOwner s "$SERVICE_NAME" 2>/dev/null)" != "b true" ]
}

# Stops the running daemon, if any: through systemd where it runs, else SIGTERM to
# the PID, then waits (up to 20 s: the daemon's own stop takes at most 15) until the
# process has ended and the name is free. Prints what it did; fails if the daemon
# would not stop.
stop_running_daemon() {
    if has_systemd; then
        if systemctl is-active --quiet permissionsd.service; then
            systemctl stop permissionsd.service && echo "$(basename "$0"): stopped permissionsd.service" >&2
        fi
        return 0
    fi
    local pid
    pid=$(running_daemon_pid) || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    stopped_within 20 "permissionsd (pid $pid)" daemon_gone "$pid"
}

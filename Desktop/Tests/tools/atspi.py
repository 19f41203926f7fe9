#!/usr/bin/python3
"""The tests' hands and eyes on the desktop programs, through AT-SPI.

  atspi.py dialog APP TIMEOUT       wait until APP shows a dialog; print what it holds,
                                    one "ROLE<TAB>NAME" line an object, in tree order
  atspi.py click APP PREFIX TIMEOUT click the first push button whose name starts with
                                    PREFIX (GTK 4.8 doubles a button's name; the
                                    dialog holds each button twice, wide and narrow)
  atspi.py gone APP TIMEOUT         wait until APP shows no dialog
  atspi.py count APP                print how many dialogs APP shows
  atspi.py quit APP TIMEOUT         wait until no application named APP is on the
                                    accessibility bus (it exited)

For an application's windows (the settings page), on the tree of what is shown
(a hidden widget and all under it left out):
  atspi.py tree APP TIMEOUT         wait until APP shows a window; print what it
                                    shows, one "ROLE<TAB>NAME<TAB>STATES" line an object
  atspi.py find APP ROLE NAME TIMEOUT [STATE...]
                                    wait until an object of ROLE named NAME (a prefix
                                    when NAME ends with "*") is shown, with every
                                    STATE ("checked", "sensitive"; "!checked" for
                                    its absence); print its line
  atspi.py absent APP ROLE NAME TIMEOUT
                                    wait until no such object is shown
  atspi.py press APP ROLE NAME TIMEOUT
                                    find it (sensitive), then do its first action
  atspi.py type APP ROLE NAME TEXT TIMEOUT
                                    find it, then replace its text with TEXT

Widgets are found by role and name, never by position. Exit 1 with a line on stderr
when the deadline passes.
"""
import sys
import time

import pyatspi
from gi.repository import GLib


def application(name):
    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        app = desktop.getChildAtIndex(i)
        if app is not None and app.name == name:
            return app
    return None


def walk(node, depth=0):
    yield node, depth
    for i in range(node.childCount):
        child = node.getChildAtIndex(i)
        if child is not None:
            yield from walk(child, depth + 1)


def showing_dialogs(name):
    app = application(name)
    if app is None:
        return []
    windows = (app.getChildAtIndex(i) for i in range(app.childCount))
    return [window for window in windows if window is not None and window.getRole() == pyatspi.ROLE_DIALOG
            and window.getState().contains(pyatspi.STATE_VISIBLE)]


def showing_dialog(name):
    dialogs = showing_dialogs(name)
    return dialogs[0] if dialogs else None


# What AT-SPI answers about an object the application has just removed, as the
# walk reaches it: the object is gone ("Object does not exist"), its path no
# longer carries the interfaces ("No such interface “org.a11y.atspi.Accessible”
# on object at path ...", GTK having unexported it first), or libatspi's cache
# has let go of the application under it ("The application no longer exists").
# Seen on CI as a list's last row went. The last one is also what an application
# that crashed gives: the harness checks on its own that the page still runs.
VANISHED = ("does not exist", "No such interface", "no longer exists")


def until(deadline, what, check):
    """Polls `check` (the accessibility tree announces nothing we could wait on
    from here without a main loop of our own) until it gives a value. A check
    that meets an object the application has just removed (the tree changed under
    the walk: `VANISHED`) is made again, as one that found nothing yet."""
    while True:
        try:
            value = check()
        except GLib.GError as error:
            if not any(words in str(error) for words in VANISHED):
                raise
            value = None
        if value is not None:
            return value
        if time.monotonic() > deadline:
            sys.exit(f"atspi.py: {what}")
        time.sleep(0.05)


STATES = {"checked": pyatspi.STATE_CHECKED, "sensitive": pyatspi.STATE_SENSITIVE,
          "focused": pyatspi.STATE_FOCUSED, "pressed": pyatspi.STATE_PRESSED}


def shown(node):
    """The objects shown under `node`: a hidden one (not visible, or a page of a
    stack that is not its visible child, which GTK leaves unmapped) and all under
    it are left out."""
    states = node.getState()
    if not states.contains(pyatspi.STATE_VISIBLE):
        return
    yield node
    for i in range(node.childCount):
        child = node.getChildAtIndex(i)
        if child is not None:
            yield from shown(child)


def line(node):
    states = node.getState()
    names = [name for name, state in STATES.items() if states.contains(state)]
    return f"{node.getRoleName()}\t{node.name}\t{','.join(names)}"


def windows(name):
    app = application(name)
    if app is None:
        return []
    found = (app.getChildAtIndex(i) for i in range(app.childCount))
    return [window for window in found
            if window is not None and window.getState().contains(pyatspi.STATE_VISIBLE)]


def matches(node, role, name, wanted):
    if node.getRoleName() != role:
        return False
    if not (node.name.startswith(name[:-1]) if name.endswith("*") else node.name == name):
        return False
    states = node.getState()
    for state in wanted:
        negate = state.startswith("!")
        if states.contains(STATES[state.lstrip("!")]) == negate:
            return False
    return True


def find(app, role, name, wanted):
    for window in windows(app):
        for node in shown(window):
            if matches(node, role, name, wanted):
                return node
    return None


def settings_command(command, argv, deadline):
    app = argv[2]
    if command == "tree":
        found = until(deadline, f"no window of {app}", lambda: windows(app) or None)
        for window in found:
            for node in shown(window):
                print(line(node))
        return
    role, name = argv[3], argv[4]
    if command == "find":
        node = until(deadline, f"no {role} {name!r} {argv[6:]} shown by {app}",
                     lambda: find(app, role, name, argv[6:]))
        print(line(node))
    elif command == "absent":
        until(deadline, f"{role} {name!r} is still shown by {app}",
              lambda: True if find(app, role, name, []) is None else None)
    elif command == "press":
        until(deadline, f"no sensitive {role} {name!r} shown by {app}",
              lambda: find(app, role, name, ["sensitive"])).queryAction().doAction(0)
    elif command == "type":
        node = until(deadline, f"no {role} {name!r} shown by {app}", lambda: find(app, role, name, []))
        node.queryEditableText().setTextContents(argv[5])


def main(argv):
    command, app = argv[1], argv[2]
    if command == "count":
        return print(len(showing_dialogs(app)))
    if command in ("tree", "find", "absent", "press", "type"):
        timeout = argv[3] if command == "tree" else argv[6 if command == "type" else 5]
        return settings_command(command, argv, time.monotonic() + float(timeout))
    deadline = time.monotonic() + float(argv[-1])
    if command == "dialog":
        dialog = until(deadline, f"no dialog of {app}", lambda: showing_dialog(app))
        for node, depth in walk(dialog):
            text = node.name
            if node.getRole() == pyatspi.ROLE_LABEL and not text:
                try:
                    text = node.queryText().getText(0, -1)
                except NotImplementedError:
                    pass
            print(f"{'  ' * depth}{node.getRoleName()}\t{text}")
    elif command == "click":
        prefix = argv[3]

        def button():
            dialog = showing_dialog(app)
            if dialog is None:
                return None
            for node, _ in walk(dialog):
                if node.getRole() == pyatspi.ROLE_PUSH_BUTTON and node.name.startswith(prefix):
                    return node
            return None
        until(deadline, f"no button {prefix!r} in a dialog of {app}", button).queryAction().doAction(0)
    elif command == "quit":
        until(deadline, f"{app} is still running", lambda: True if application(app) is None else None)
    elif command == "gone":
        until(deadline, f"a dialog of {app} is still shown", lambda: True if showing_dialog(app) is None else None)
    else:
        sys.exit(f"atspi.py: unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)

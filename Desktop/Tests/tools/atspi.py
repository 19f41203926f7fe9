#!/usr/bin/python3
"""The tests' hands and eyes on the desktop programs, through AT-SPI.

  atspi.py dialog APP TIMEOUT       wait until APP shows a dialog; print what it holds,
                                    one "ROLE<TAB>NAME" line an object, in tree order
  atspi.py click APP PREFIX TIMEOUT click the first push button whose name starts with
                                    PREFIX (GTK 4.8 doubles a button's name; the
                                    dialog holds each button twice, wide and narrow)
  atspi.py gone APP TIMEOUT         wait until APP shows no dialog
  atspi.py count APP                print how many dialogs APP shows

Widgets are found by role and name, never by position. Exit 1 with a line on stderr
when the deadline passes.
"""
import sys
import time

import pyatspi


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


def until(deadline, what, check):
    """Polls `check` (the accessibility tree announces nothing we could wait on
    from here without a main loop of our own) until it gives a value."""
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            sys.exit(f"atspi.py: {what}")
        time.sleep(0.05)


def main(argv):
    command, app = argv[1], argv[2]
    if command == "count":
        return print(len(showing_dialogs(app)))
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
    elif command == "gone":
        until(deadline, f"a dialog of {app} is still shown", lambda: True if showing_dialog(app) is None else None)
    else:
        sys.exit(f"atspi.py: unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)

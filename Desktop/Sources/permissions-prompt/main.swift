// permissions-prompt: the desktop's prompt agent. It registers with the
// permissions service as the user's agent and asks each question in a dialog.
internal import CAdw
internal import DesktopSupport
internal import Glibc

/// The usage text, one literal (the translation template reads it as C).
func usage() -> String {
    tr("Usage: permissions-prompt [--system | --session | --address ADDRESS]\n       permissions-prompt --version\n\nAnswers the permission prompts of your user in a dialog, as long as it runs.\n\n  --system             the service on the system bus (the default)\n  --session            the service on the session bus\n  --address ADDRESS    the service on the bus at ADDRESS\n  --version            show the package and interface versions\n  -h, --help           show this help\n\nWithout a bus option, PERMISSIONS_BUS names the bus: system, session, or a\nD-Bus address.\n")
}

func runPrompt() -> Never {
    setUpTranslations()
    let choice = parseCommandLine(program: "permissions-prompt", usage: usage())
    g_set_prgname("permissions-prompt")
    g_set_application_name(tr("Permission prompts"))
    adw_init()
    let connection: OpaquePointer
    switch choice.connect() {
    case .success(let made): connection = made
    case .failure(let error):
        printError("permissions-prompt", "cannot connect to the bus: \(error)")
        exit(1)
    }
    // The bus gone, nothing is left to do (the session is ending).
    g_dbus_connection_set_exit_on_close(connection, 1)
    let agent = PromptAgent(connection: connection)
    do throws(GLibError) {
        try agent.start()
    } catch {
        printError("permissions-prompt", "cannot export the agent: \(error)")
        exit(1)
    }
    g_main_loop_run(g_main_loop_new(nil, 0))
    exit(0)
}

runPrompt()

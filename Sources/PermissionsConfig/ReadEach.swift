package import PermissionsModel

extension ConfigFiles {
    /// Every file of the configuration read on its own, for `permissionsd
    /// --check-config`: each problem, not just the first (a name that cannot be
    /// looked at, a drop-in directory that cannot be listed, each file that cannot
    /// be read or parsed), and the merged entries of the files that could be, so
    /// that their values can be checked too. The running daemon refuses the
    /// configuration at the first of these problems (`read()`).
    package func readEach() -> (entries: [ConfigEntry], problems: [ParseError]) {
        let listed = listing()
        var problems = listed.problem.map { [$0] } ?? []
        var parsed: [[ConfigEntry]] = []
        for file in listed.files {
            do {
                parsed.append(try Self.parse(file))
            } catch {
                problems.append(error)
            }
        }
        return (Self.merged(parsed), problems)
    }
}

import Testing
@testable import DBusKit

/// Match rules quote every value as the D-Bus specification says: inside single
/// quotes nothing is special, and a single quote is written `'\''`.
@Suite("Match rules")
struct MatchRuleTests {
    @Test(arguments: [
        ("org.bluez", "'org.bluez'"),
        ("", "''"),
        ("it's", #"'it'\''s'"#),
        ("'", #"''\'''"#),
        ("''", #"''\'''\'''"#),
        ("a,b", "'a,b'"),
        ("a',member='Forged", #"'a'\'',member='\''Forged'"#),
        (#"back\slash"#, #"'back\slash'"#),
        (#"ends with \"#, #"'ends with \'"#),
        (#"\'"#, #"'\'\'''"#),
        ("日本 ✓", "'日本 ✓'"),
    ])
    func quotesOneValue(value: String, quoted: String) {
        #expect(MatchRule.quote(value) == quoted)
    }

    @Test func keysInOrderAndNilValuesLeftOut() throws {
        let rule = try MatchRule(["type": "signal", "sender": nil, "interface": "org.example.I",
                                  "arg0": "it's, \\ here"])
        #expect(rule.text == #"type='signal',interface='org.example.I',arg0='it'\''s, \ here'"#)
    }

    @Test func signalMatchUsesTheBuilder() throws {
        let match = SignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                interface: "org.freedesktop.DBus", member: "NameOwnerChanged", arg0: "o'k,x")
        #expect(try match.rule().text == "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                + #"interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='o'\''k,x'"#)
        #expect(try SignalMatch().rule().text == "type='signal'")
    }

    /// libdbus takes the rule as a C string, which a NUL would cut short, quotes and all.
    @Test func aNulByteIsRefusedAndQuoted() {
        let error = busError { () throws(BusError) in _ = try MatchRule(["type": "signal", "arg0": "a\0b"]) }
        #expect(error == BusError(BusError.invalidArgs, "match rule value for arg0 contains a NUL byte: \"a\\x00b\""))
    }
}

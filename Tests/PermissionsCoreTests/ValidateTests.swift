import Testing
@testable import PermissionsModel

@Suite("Name checks")
struct ValidateTests {
    @Test(arguments: ["camera", "microphone", "bluetooth", "a", "a1", "a-", "x-y-z", "z9-0",
                      "a" + String(repeating: "b", count: 63)])
    func validPermissionName(_ name: String) {
        #expect(Validate.isPermissionName(name))
    }

    @Test(arguments: ["", "a" + String(repeating: "b", count: 64), "Camera", "CAMERA", "camerA", "1camera",
                      "-camera", "cam era", "cam_era", "cam.era", "camera\n", "\tcamera", "camera\0",
                      "caméra", "../camera", "/camera", "camera/..", "..", "ｃａｍｅｒａ"])
    func invalidPermissionName(_ name: String) {
        #expect(!Validate.isPermissionName(name))
    }

    @Test(arguments: ["org.gnome.Maps", "org.foo-bar", "org.example.App_1", "a",
                      "/usr/bin/gnome-weather", "/opt/My App/bin/app", "/usr/lib/x86_64-linux-gnu/a.b/c",
                      "org." + String(repeating: "x", count: 251)])
    func validAppID(_ id: String) {
        #expect(Validate.isAppID(id))
    }

    @Test(arguments: [
        "", "org." + String(repeating: "x", count: 252), "/" + String(repeating: "x", count: 255),
        "org..foo", "..", "../etc/passwd", "/a/../b", "/..", "/a/..", "/a/./b", "/./x",
        "org.foo\nbar", "org.foo\n", "org.foo\u{1}", "org.foo\u{1b}[2J", "org.foo\u{7f}", "org.foo\0",
        "org foo", " org.foo", "org.foo\t", "org.foo/bar", "relative/path", "usr/bin/true",
        "org.gnömé", "/usr/bin/café",
    ])
    func invalidAppID(_ id: String) {
        #expect(!Validate.isAppID(id))
    }

    @Test func lengthLimitsAreBytesNotCharacters() {
        #expect(String(repeating: "x", count: 255).utf8.count == 255)
        #expect(Validate.isAppID(String(repeating: "x", count: 255)))
        #expect(!Validate.isAppID(String(repeating: "x", count: 256)))
        #expect(Validate.isPermissionName(String(repeating: "x", count: 64)))
        #expect(!Validate.isPermissionName(String(repeating: "x", count: 65)))
    }
}

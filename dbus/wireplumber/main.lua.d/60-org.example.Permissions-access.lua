-- permissionsd: WirePlumber 0.4 (Lua configuration) leaves the PipeWire clients
-- that permissionsd hands to apps alone.
--
-- permissionsd connects to a user's PipeWire for an app (OpenPipeWireRemote) with
-- pipewire.access = "org.example.permissions", so PipeWire's module-access gives the
-- client no permissions, and grants it, object by object, what the app may use.
-- WirePlumber's access script (access-default.lua) sets the default permissions
-- (those of every object without its own) of each new client from the first rule
-- in default_access.rules that matches it. A rule a site adds, such as "rx" for
-- every restricted client, would let the app see and use every object. This rule,
-- first in the list, matches our clients before any other can and sets their
-- default to nothing ("-", no bits): what it already is. The objects permissionsd
-- granted keep their own permissions (PipeWire changes the default only for
-- objects that have none of their own).
--
-- Installed in WirePlumber's data directory (/usr/share/wireplumber/main.lua.d/);
-- it runs after 20-default-access.lua and 50-default-access-config.lua, before
-- 90-enable-all.lua. The rule is put first when the access script is enabled, so
-- that rules a later file adds, or a whole list it puts in place, come after it.

if type(default_access) ~= "table" or type(default_access.enable) ~= "function" then
  return  -- not the configuration this was written for: change nothing
end

local permissionsd_rule = {
  matches = {
    {
      { "pipewire.access", "=", "org.example.permissions" },
    },
  },
  default_permissions = "-",
}

local enable = default_access.enable
function default_access.enable()
  table.insert(default_access.rules, 1, permissionsd_rule)
  enable()
end

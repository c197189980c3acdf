# The example policy of rego-guard: what shell-guard, secret-guard and no-force-push decide,
# as Rego. `input` is the request (docs/policies.md); `data.branches` is branches.json.
package palisade

import rego.v1

# The command a tool runs, whatever the agent calls it: `command` (Claude Code, Gemini CLI, an
# ACP agent, an MCP shell tool) or Codex's `cmd`, a string or its words.
command := input.tool.arguments.command if {
	is_string(input.tool.arguments.command)
} else := input.tool.arguments.cmd if {
	is_string(input.tool.arguments.cmd)
} else := concat(" ", input.tool.arguments.cmd) if {
	is_array(input.tool.arguments.cmd)
}

# A protected branch, named alone or as the target of a refspec.
protected_branch := concat("|", data.branches.protected)

deny contains {"reason_code": "destructive-delete", "message": msg} if {
	regex.match(`(^|[;&|]\s*|\bsudo\s+)rm\s+(-[A-Za-z]*\s+|--[a-z-]+\s+)*(--\s+)?(/|~|~/|\$HOME)(\s|;|$)`, command)
	msg := "Refused: this would delete the filesystem root or the home directory."
}

deny contains {"reason_code": "pipe-to-shell", "message": msg} if {
	regex.match(`\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b`, command)
	msg := "Refused: piping a download into a shell runs code no one has read. Download it, read it, then run it."
}

deny contains {"reason_code": "force-push-main", "message": msg} if {
	regex.match(`\bgit\s+push\b`, command)
	force_pushes_protected(command)
	msg := "Refused: force-pushing a protected branch rewrites history others build on. Push a branch and open a pull request."
}

# A word ends at a space, at the end, or where the shell starts another command.
end := `([\s;&|)]|$)`

force_pushes_protected(cmd) if {
	regex.match(sprintf(`\s(-f|--force)%s`, [end]), cmd)
	regex.match(sprintf(`\s(%s)%s`, [protected_branch, end]), cmd)
}

force_pushes_protected(cmd) if regex.match(sprintf(`\s\+(%s)%s`, [protected_branch, end]), cmd)

# secret-guard's rule: a secrets file named by any tool's path argument (a file tool of an
# agent, an MCP filesystem server's).
secret_file(path) if {
	regex.match(`(^|/)\.env(\.[A-Za-z0-9_-]+)?$`, path)
	not regex.match(`\.env\.(example|sample|template)$`, path)
}

secret_file(path) if regex.match(`(^|/)\.ssh/id_[A-Za-z0-9_]+$`, path)

deny contains {"reason_code": "secret-file", "message": msg} if {
	some key in ["file_path", "path"]
	path := input.tool.arguments[key]
	is_string(path)
	secret_file(path)
	msg := sprintf("Refused: `%s` holds secrets, and tools may not read or write secret files.", [path])
}

# Asking, not refusing: a package installed from outside the project's lockfile.
ask contains "installs a global package: is that wanted?" if {
	regex.match(`\bnpm\s+(install|i)\s+(-g|--global)\b`, command)
}

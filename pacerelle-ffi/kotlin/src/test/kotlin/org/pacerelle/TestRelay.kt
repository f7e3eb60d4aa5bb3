package org.pacerelle

import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit

/**
 * A real relay with the echo agent, started once for the whole test run: `pacerelle serve` on 127.0.0.1:0
 * with a temporary database (and `--allow-private-push-endpoints`, for the push tests), an agent created by
 * `pacerelle agent create`, and `echo-agent --takeover`.
 * Agent-side steps (pairing links, questions, revocations) run the `pacerelle` command, as a person would.
 */
object TestRelay {
    private val target = File(System.getProperty("pacerelle.binaries") ?: "../../target/debug").absoluteFile
    private val pacerelle = File(target, "pacerelle").path
    private val echoAgent = File(target, "echo-agent").path
    internal val dir: File = Files.createTempDirectory("pacerelle-kotlin").toFile()
    private val home = File(dir, "home")
    private val processes = mutableListOf<Process>()

    val relayUrl: String
    val agentId: String
    private val agentToken: String

    init {
        Runtime.getRuntime().addShutdownHook(Thread { stop() })
        // Private push endpoints allowed: the push tests' push service listens on 127.0.0.1.
        val serve = ProcessBuilder(
            pacerelle, "serve", "--listen", "127.0.0.1:0", "--json", "--data", File(dir, "data").path,
            "--allow-private-push-endpoints",
        )
            .redirectError(File(dir, "relay.log"))
            .start()
        processes += serve
        relayUrl = readJsonField(serve, "relayUrl")
        val agent = run("agent", "create", "--name", "kotlin tests", "--json")
        agentId = field(agent, "agentId")
        agentToken = field(agent, "token")
        val echo = ProcessBuilder(echoAgent, "--takeover")
            .apply {
                environment()["PACERELLE_RELAY_URL"] = relayUrl
                environment()["PACERELLE_AGENT_ID"] = agentId
                environment()["PACERELLE_AGENT_TOKEN"] = agentToken
            }
            .redirectErrorStream(true)
            .redirectOutput(File(dir, "echo-agent.log"))
            .start()
        processes += echo
    }

    /** A fresh single-use pairing link. */
    fun pairingLink(): String = field(run("pair", "--json"), "link")

    /** Revokes a device from the agent side. */
    fun revoke(deviceId: String) {
        run("agent", "revoke", deviceId, "--json")
    }

    /** Starts `pacerelle ask …` (it exits 0 when the answer approves, non-zero otherwise). */
    fun ask(vararg args: String): Process =
        command(*arrayOf("ask", *args, "--json")).redirectErrorStream(true).start().also { processes += it }

    /** Runs one `pacerelle` command and returns its standard output; fails on a non-zero exit. */
    fun run(vararg args: String): String = runIn(home, *args)

    /** Runs one `pacerelle` command with [home] as its home; fails on a non-zero exit. */
    internal fun runIn(home: File, vararg args: String): String {
        val (status, out, err) = runAny(home, *args)
        check(status == 0) { "pacerelle ${args.joinToString(" ")} failed: $err" }
        return out
    }

    /** Runs one `pacerelle` command with [home] as its home: its exit status, standard output and error. */
    internal fun runAny(home: File, vararg args: String): Triple<Int, String, String> {
        val process = command(home, *args).redirectErrorStream(false).start()
        val out = process.inputStream.bufferedReader().readText()
        val err = process.errorStream.bufferedReader().readText()
        check(process.waitFor(60, TimeUnit.SECONDS)) { "pacerelle ${args.joinToString(" ")} did not finish" }
        return Triple(process.exitValue(), out, err)
    }

    /** Starts `pacerelle …` with [home] as its home; the process is stopped with the relay. */
    internal fun start(home: File, vararg args: String): Process =
        command(home, *args).redirectErrorStream(true).start().also { processes += it }

    private fun command(vararg args: String): ProcessBuilder = command(home, *args)

    private fun command(home: File, vararg args: String): ProcessBuilder =
        ProcessBuilder(pacerelle, *args).apply {
            environment()["PACERELLE_HOME"] = home.path
            environment()["PACERELLE_RELAY_URL"] = relayUrl
        }

    private fun stop() {
        processes.forEach { it.destroy() }
        processes.forEach { if (!it.waitFor(5, TimeUnit.SECONDS)) it.destroyForcibly() }
        dir.deleteRecursively()
    }

    /** Reads a JSON field from a process's output as soon as it is printed (the process goes on running). */
    private fun readJsonField(process: Process, name: String): String {
        val reader = process.inputStream.bufferedReader()
        val seen = StringBuilder()
        while (true) {
            val line = reader.readLine() ?: error("the relay stopped before printing $name: $seen")
            seen.appendLine(line)
            fieldOrNull(seen.toString(), name)?.let { return it }
        }
    }

    fun field(json: String, name: String): String =
        fieldOrNull(json, name) ?: error("no \"$name\" in $json")

    private fun fieldOrNull(json: String, name: String): String? =
        Regex("\"${Regex.escape(name)}\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"").find(json)?.groupValues?.get(1)
}

/**
 * Another agent on the test relay, with its own `pacerelle` home (`pacerelle agent create`): its roster and
 * answer log hold only what one test did. No agent process consumes its tasks.
 */
class SeparateAgent(name: String) {
    /** Its `pacerelle` home. */
    val home = File(TestRelay.dir, "home-${System.nanoTime()}")

    /** Its id. */
    val agentId: String

    init {
        agentId = TestRelay.field(run("agent", "create", "--name", name, "--json"), "agentId")
    }

    /** A fresh single-use pairing link. */
    fun pairingLink(): String = TestRelay.field(run("pair", "--json"), "link")

    /** Starts `pacerelle ask …` (it exits 0 when the answer approves, non-zero otherwise). */
    fun ask(vararg args: String): Process = TestRelay.start(home, "ask", *args, "--json")

    /** Runs one `pacerelle` command as this agent and returns its standard output; fails on a non-zero exit. */
    fun run(vararg args: String): String = TestRelay.runIn(home, *args)

    /** Runs one `pacerelle` command as this agent: its exit status, standard output and error. */
    fun runAny(vararg args: String): Triple<Int, String, String> = TestRelay.runAny(home, *args)
}

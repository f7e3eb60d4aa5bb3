package org.pacerelle

import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.pacerelle.core.Answer
import org.pacerelle.core.CommandMatch
import org.pacerelle.core.QuestionState

/**
 * Grants and several approvals through the Kotlin binding: a gate question from the real PreToolUse hook
 * (`pacerelle hook claude-code` with a policy), answered "allow for 15 min" here; the grant listed with its
 * uses and revoked here; and a question that needs two devices' approvals (`pacerelle ask --approvals 2`).
 */
class GrantTest {
    private val agentHome = File(TestRelay.dir, "home")

    /** Runs the gate on `command` in `folder`; returns (allowed, its output) once it has decided. */
    private fun gate(folder: File, command: String, budget: String): Pair<Boolean, String> {
        val input = """{"session_id":"s","cwd":"${folder.path}","hook_event_name":"PreToolUse",""" +
            """"tool_name":"Bash","tool_input":{"command":"$command"}}"""
        val hook = TestRelay.start(agentHome, "hook", "claude-code", "--budget", budget)
        hook.outputStream.use { it.write(input.toByteArray()) }
        assertTrue(hook.waitFor(90, TimeUnit.SECONDS), "the gate decided")
        val out = hook.inputStream.bufferedReader().readText()
        return Regex("\"permissionDecision\"\\s*:\\s*\"allow\"").containsMatchIn(out) to out
    }

    @Test
    fun `allow for 15 min lets the same call run until the grant is revoked here`() = runBlocking<Unit> {
        val phone = joinNewDevice("granting phone")
        val project = Files.createTempDirectory("gated").toFile()
        File(project, ".pacerelle").mkdirs()
        File(project, ".pacerelle/policy.toml").writeText("default = \"ask\"\n")
        val command = "cargo test t${System.nanoTime()}"
        val first = async(Dispatchers.IO) { gate(project, command, "60") }

        val question = phone.awaitQuestion("Allow Claude Code to run `$command`?")
        val offer = question.grants
        assertNotNull(offer)
        offer!!
        assertEquals(listOf(900uL, 3600uL), offer.durations)
        assertEquals(command, offer.scopes[0].command)
        assertEquals(CommandMatch.EXACT, offer.scopes[0].matching)
        assertEquals(project.path, offer.scopes[0].folder)
        val answered = phone.answerGranting(question.questionId, 0u, 900uL)
        assertEquals(QuestionState.ANSWERED, answered.state)
        val (allowed, out) = first.await()
        assertTrue(allowed, out)

        // The same call again: no question, allowed by the grant.
        val (again, reason) = gate(project, command, "10")
        assertTrue(again && reason.contains("allowed by grant ${question.questionId}"), reason)

        // Listed here with its scope and its use.
        val listed = phone.grants().single { it.grantId == question.questionId }
        assertEquals(1uL, listed.uses)
        assertEquals(command, listed.scope?.command)
        assertEquals(phone.identity().deviceId, listed.deviceId)
        assertTrue(listed.expiresAt.isAfter(listed.grantedAt))

        // Revoked here: the next call is asked again (and, nobody answering within the budget, denied).
        val revoked = phone.revokeGrant(question.questionId)
        assertNotNull(revoked.revokedAt)
        assertEquals(phone.identity().deviceId, revoked.revokedBy)
        val (afterRevoke, text) = gate(project, command, "3")
        assertFalse(afterRevoke, text)
    }

    @Test
    fun `a question that needs two approvals waits for a second device`() = runBlocking<Unit> {
        val first = joinNewDevice("first approver")
        val second = joinNewDevice("second approver")
        val text = "Two people? ${System.nanoTime()}"
        val ask = TestRelay.ask(text, "--approvals", "2", "--expires", "2m")

        val q = first.awaitQuestion(text)
        assertEquals(2u, q.approvals)
        val kept = first.answer(q.questionId, Answer.Yes)
        assertEquals(QuestionState.PENDING, kept.state)
        assertEquals(listOf(first.identity().deviceId), kept.answers)
        assertFalse(ask.waitFor(1, TimeUnit.SECONDS), "one approval of two leaves it waiting")

        val seen = second.awaitQuestion(text)
        assertEquals(1, seen.answers.size)
        second.answer(seen.questionId, Answer.Yes)
        assertTrue(ask.waitFor(60, TimeUnit.SECONDS))
        val out = ask.inputStream.bufferedReader().readText()
        assertEquals(0, ask.exitValue(), out)
    }
}

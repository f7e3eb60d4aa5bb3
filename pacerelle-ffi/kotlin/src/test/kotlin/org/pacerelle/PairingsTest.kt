package org.pacerelle

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.pacerelle.core.Answer

/**
 * One phone paired with several agents (`Pairings`), and a Partner-mode pairing made by `pacerelle user
 * connect`: the agents ask with `pacerelle ask`, which exits 0 when the answer approves.
 */
class PairingsTest {
    private fun unique(text: String) = "$text ${System.nanoTime()}"

    private fun finished(ask: Process): Pair<Int, String> {
        assertTrue(ask.waitFor(60, TimeUnit.SECONDS), "pacerelle ask finished")
        return ask.exitValue() to ask.inputStream.bufferedReader().readText()
    }

    /** Polls the questions pending across every agent until one has this text. */
    private suspend fun Pairings.awaitQuestion(text: String): AgentQuestion = withTimeout(30_000) {
        while (true) {
            pendingQuestions().questions.firstOrNull { it.question.question == text }?.let { return@withTimeout it }
            delay(100)
        }
        @Suppress("UNREACHABLE_CODE")
        error("unreachable")
    }

    @Test
    fun `one phone answers two agents and unpairing one leaves the other`() = runBlocking<Unit> {
        val laptop = SeparateAgent("laptop")
        val server = SeparateAgent("build server")
        val phone = Pairings()
        phone.add(DeviceClient.join(laptop.pairingLink(), "phone"))
        phone.add(DeviceClient.join(server.pairingLink(), "phone"))
        assertEquals(listOf("laptop", "build server"), phone.identities().map { it.agentName })

        val fromLaptop = unique("Push to main?")
        val fromServer = unique("Restart the database?")
        val askLaptop = laptop.ask(fromLaptop, "--expires", "2m")
        val askServer = server.ask(fromServer, "--expires", "2m")

        // One view across both agents, each question labelled with its agent, answered through that agent.
        for ((text, agent) in listOf(fromLaptop to laptop, fromServer to server)) {
            val waiting = phone.awaitQuestion(text)
            assertEquals(agent.agentId, waiting.agentId)
            val device = phone.device(waiting.agentId) ?: error("no pairing held for ${waiting.agentId}")
            device.answer(waiting.question.questionId, Answer.Yes)
        }
        for (ask in listOf(askLaptop, askServer)) {
            val (status, out) = finished(ask)
            assertEquals(0, status, out)
        }
        assertTrue(phone.presence().all { it.status != null && it.failure == null })

        // Unpairing the laptop leaves the server's pairing working.
        assertTrue(phone.unpair(laptop.agentId))
        assertEquals(listOf("build server"), phone.identities().map { it.agentName })
        val after = unique("Rotate the keys?")
        val ask = server.ask(after, "--expires", "2m")
        val waiting = phone.awaitQuestion(after)
        phone.device(waiting.agentId)!!.answer(waiting.question.questionId, Answer.Yes)
        assertEquals(0, finished(ask).first)
    }

    @Test
    fun `a partner pairing names its user and the product's branding`() = runBlocking<Unit> {
        val acme = SeparateAgent("Acme Support")
        val icon = java.io.File(TestRelay.dir, "acme-${System.nanoTime()}.svg")
        icon.writeText("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1 1\"/>")
        val connected = acme.run("user", "connect", "cus_42", "--name", "Alice Martin", "--accent", "#0a7d5a",
            "--icon", icon.path, "--json")
        val device = DeviceClient.join(TestRelay.field(connected, "link"), "alice's phone")
        val identity = device.identity()
        assertEquals("user", identity.role)
        assertEquals("cus_42", identity.user?.externalId)
        assertEquals("Alice Martin", identity.user?.name)
        assertEquals("#0a7d5a", identity.branding?.accentColor)
        assertTrue(identity.branding?.icon?.startsWith("data:image/svg+xml;base64,") == true)

        val text = unique("Refund order 42?")
        val ask = acme.ask(text, "--user", "cus_42", "--expires", "2m")
        val question = device.awaitQuestion(text)
        device.answer(question.questionId, Answer.Yes)
        val (status, out) = finished(ask)
        assertEquals(0, status, out)
    }
}

package org.pacerelle

import java.io.File
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.pacerelle.core.Answer

/**
 * Answers signed on a Kotlin device: the Rust agent (`pacerelle ask`) approves them as signed, and its signed
 * answer-log export (`pacerelle audit export --format signed`) passes `pacerelle audit verify`.
 */
class SigningTest {
    private val fingerprintShape = Regex("^([0-9a-f]{4} ){5}[0-9a-f]{4}$")

    /** Waits for `pacerelle ask` to finish; returns its exit status and output. */
    private fun finished(ask: Process): Pair<Int, String> {
        assertTrue(ask.waitFor(60, TimeUnit.SECONDS), "pacerelle ask finished")
        return ask.exitValue() to ask.inputStream.bufferedReader().readText()
    }

    private fun flag(json: String, name: String): Boolean? =
        Regex("\"${Regex.escape(name)}\"\\s*:\\s*(true|false)").find(json)?.groupValues?.get(1)?.toBooleanStrict()

    @Test
    fun `a yes signed here is approved and signed by the Rust agent and its export verifies`() = runBlocking<Unit> {
        val agent = SeparateAgent("kotlin signing")
        val device = DeviceClient.join(agent.pairingLink(), "signing phone")
        val fingerprint = device.signingFingerprint()
        assertNotNull(fingerprint)
        assertTrue(fingerprintShape.matches(fingerprint!!), fingerprint)
        // The key is in the credentials blob: a restored device holds the same key.
        val restored = DeviceClient.restore(device.credentials())
        assertEquals(fingerprint, restored.signingFingerprint())
        // Registering again sends the same key, which the relay already lists.
        assertEquals(fingerprint, restored.registerSigningKey())
        // Another device draws another key.
        val other = DeviceClient.join(agent.pairingLink(), "second phone")
        assertNotEquals(fingerprint, other.signingFingerprint())

        val text = "Deploy v2 to production? ${System.nanoTime()}"
        val ask = agent.ask(text, "--details", "3 commits", "--expires", "2m")
        val question = restored.awaitQuestion(text)
        restored.answer(question.questionId, Answer.Yes)
        val (status, out) = finished(ask)
        assertEquals(0, status, out)
        assertEquals(true, flag(out, "approved"), out)
        assertEquals(true, flag(out, "signed"), out)

        // A no from the other device, signed too: not approved, still in the log that verifies.
        val text2 = "Drop the cache? ${System.nanoTime()}"
        val ask2 = agent.ask(text2, "--expires", "2m")
        val question2 = other.awaitQuestion(text2)
        other.answer(question2.questionId, Answer.No)
        val (status2, out2) = finished(ask2)
        assertNotEquals(0, status2, out2)
        assertEquals(false, flag(out2, "approved"), out2)
        assertEquals(true, flag(out2, "signed"), out2)

        val export = File(agent.home, "answers.json")
        agent.run("audit", "export", "--format", "signed", "--output", export.path)
        val exported = export.readText()
        assertTrue(exported.contains(fingerprint), "the export shows the device's fingerprint")
        assertTrue(exported.contains(question.questionId) && exported.contains(question2.questionId), exported)
        val (verified, verifyOut, verifyErr) = agent.runAny("audit", "verify", export.path)
        assertEquals(0, verified, "$verifyOut$verifyErr")

        // One character of the first signature changed: the record is named and the exit status is 1.
        val signature = Regex("\"signature\"\\s*:\\s*\"([A-Za-z0-9_-]+)\"").find(exported)!!.groups[1]!!
        val flipped = if (signature.value[10] == 'A') 'B' else 'A'
        val tampered = File(agent.home, "tampered.json")
        tampered.writeText(exported.replaceRange(signature.range.first + 10, signature.range.first + 11, flipped.toString()))
        val (refused, refusedOut, refusedErr) = agent.runAny("audit", "verify", tampered.path)
        assertEquals(1, refused, "$refusedOut$refusedErr")
        assertTrue("$refusedOut$refusedErr".contains("record 1"), "$refusedOut$refusedErr")
    }
}

use pacerelle_core::wire::code;
use reqwest::StatusCode;

use crate::common::{db_path, start};

async fn text(url: &str) -> (StatusCode, String) {
    let resp = reqwest::get(url).await.expect("the relay answers");
    let status = resp.status();
    (status, resp.text().await.expect("a body"))
}

#[tokio::test]
async fn healthz_says_alive_and_readyz_follows_the_database_schema() {
    if crate::common::sqlite_only("edits the SQLite migrations table") {
        return;
    }
    let relay = start().await;
    assert_eq!(
        text(&format!("{}/healthz", relay.base)).await,
        (StatusCode::OK, "ok\n".to_string())
    );
    assert_eq!(
        text(&format!("{}/readyz", relay.base)).await,
        (StatusCode::OK, "ready\n".to_string())
    );

    // The database loses its newest migration behind the relay's back (an older backup put in place): the
    // relay is alive but not ready, and says why with the stable code.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db_path(&relay.dir).display()))
        .await
        .expect("the database opens");
    let (version, checksum): (i64, Vec<u8>) =
        sqlx::query_as("SELECT version, checksum FROM _sqlx_migrations ORDER BY version DESC LIMIT 1")
            .fetch_one(&pool)
            .await
            .expect("a migration row");
    let description: String =
        sqlx::query_scalar("SELECT description FROM _sqlx_migrations WHERE version = ?1")
            .bind(version)
            .fetch_one(&pool)
            .await
            .expect("its description");
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = ?1")
        .bind(version)
        .execute(&pool)
        .await
        .expect("deleted");
    let not_ready = relay.get("/readyz", "").await;
    let body = not_ready.error(StatusCode::SERVICE_UNAVAILABLE, code::UNAVAILABLE);
    assert!(body.error.contains("migrations"), "{}", body.error);
    assert_eq!(
        text(&format!("{}/healthz", relay.base)).await.0,
        StatusCode::OK,
        "alive all the same"
    );

    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (?1, ?2, TRUE, ?3, 0)",
    )
    .bind(version)
    .bind(description)
    .bind(checksum)
    .execute(&pool)
    .await
    .expect("restored");
    assert_eq!(
        text(&format!("{}/readyz", relay.base)).await,
        (StatusCode::OK, "ready\n".to_string())
    );
}

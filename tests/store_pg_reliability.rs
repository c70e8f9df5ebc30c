//! Postgres reliability: exclusivity, crash bound, fencing, DAG safety, connection chaos, polling
//! fallback and wake latency, each on a fresh database.

mod support;

use support::pg::fresh_database;

#[tokio::test]
async fn fresh_database_is_usable() {
    let db = fresh_database().await;
    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&pool)
        .await
        .expect("select");
    assert_eq!(one, 1);
    pool.close().await;
}

// Package injectbench seeds a realistic memory graph and measures the
// injector end to end: `engram bench inject` and the line-count table of
// package inject's docs.
package injectbench

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/engram-memory/engram/pkg/memory"
)

// Project is the project the corpus belongs to.
const Project = "shopfront"

// OtherProject holds a few memories whose reach is anywhere.
const OtherProject = "billing-api"

type seed struct {
	subkind  memory.Subkind
	asserted memory.Authority
	source   memory.Source
	scope    memory.Scope
	project  string
	reach    memory.Reach
	label    string
	body     string
	paths    []string
	conf     float64
}

// Seeds are hand-written memories of a web shop project: what a few months
// of agent sessions would leave behind.
var seeds = []seed{
	// Standing instructions the user stated.
	{memory.Preference, memory.AssertedUser, memory.SourceUser, memory.ScopeProject, Project, memory.ReachHere,
		"Use pnpm, never npm or yarn", "The lockfile is pnpm-lock.yaml; npm install breaks the workspace links.", nil, 0.95},
	{memory.Preference, memory.AssertedUser, memory.SourceUser, memory.ScopeGlobal, "", memory.ReachAnywhere,
		"Answer in British English", "Spelling: colour, behaviour, organise.", nil, 0.95},
	{memory.Decision, memory.AssertedUser, memory.SourceUser, memory.ScopeProject, Project, memory.ReachHere,
		"Never push directly to main", "Every change goes through a pull request with one approving review.", nil, 0.95},
	{memory.Pattern, memory.AssertedUser, memory.SourceUser, memory.ScopeProject, Project, memory.ReachHere,
		"Run the type checker before committing", "pnpm typecheck must pass; CI rejects type errors.", nil, 0.9},
	// Decisions.
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Payments go through Stripe Checkout, not Elements", "Chosen to keep PCI scope at SAQ A; custom card forms are out.",
		[]string{"src/payments/checkout.ts"}, 0.85},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Product search uses Postgres full-text search", "Meilisearch was evaluated and dropped: one more service to run for 20k products.",
		[]string{"src/search/query.ts", "db/migrations/0042_search_index.sql"}, 0.8},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Sessions are stored in Redis with a 14-day TTL", "Cookie holds only the session id; Redis key sess:<id>.",
		[]string{"src/auth/session.ts"}, 0.8},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Prices are stored as integer cents", "Never floats: rounding errors showed up in VAT totals.",
		[]string{"src/cart/money.ts"}, 0.9},
	{memory.Decision, memory.AssertedInferred, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Images are served from the CDN with width variants", "next/image loader points at cdn.shopfront.example with w=320,640,1280.",
		[]string{"next.config.js", "src/components/ProductImage.tsx"}, 0.7},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Order emails are sent by a background job, not in the request", "The checkout webhook enqueues send-order-email on BullMQ.",
		[]string{"src/jobs/orderEmail.ts", "src/payments/webhook.ts"}, 0.8},
	// Failures.
	{memory.Failure, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Stripe webhook signature failed behind the proxy", "The body parser consumed the raw body; the webhook route needs express.raw().",
		[]string{"src/payments/webhook.ts"}, 0.85},
	{memory.Failure, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Playwright tests flaked on the cart drawer animation", "Fixed by waiting for the drawer's data-state=open instead of a timeout.",
		[]string{"e2e/cart.spec.ts"}, 0.75},
	{memory.Failure, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Migration 0042 locked the products table for minutes", "Create the GIN index CONCURRENTLY in its own migration.",
		[]string{"db/migrations/0042_search_index.sql"}, 0.8},
	{memory.Failure, memory.AssertedInferred, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Docker build ran out of memory on the CI runner", "next build needs NODE_OPTIONS=--max-old-space-size=4096.",
		[]string{"Dockerfile", ".github/workflows/ci.yml"}, 0.6},
	// Patterns.
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"API routes validate input with zod schemas", "Schemas live next to the route in schema.ts; errors map to HTTP 422.",
		[]string{"src/api/products/schema.ts"}, 0.8},
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Database access goes through Prisma repositories", "No raw SQL in route handlers; repositories in src/db/repos.",
		[]string{"src/db/repos/productRepo.ts"}, 0.8},
	{memory.Pattern, memory.AssertedInferred, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Feature flags are read from the flags table at request time", "useFlag() hook on the client, getFlag() on the server.",
		[]string{"src/flags/index.ts"}, 0.65},
	// Observations.
	{memory.Observation, memory.AssertedInferred, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Checkout conversion dropped after the address form change", "Analytics showed a 4% drop in week 32; the postcode lookup was slow.",
		[]string{"src/checkout/AddressForm.tsx"}, 0.55},
	{memory.Observation, memory.AssertedInferred, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"The staging database is refreshed from production every Sunday", "Anonymised by scripts/anonymise.sql.",
		[]string{"scripts/anonymise.sql"}, 0.6},
	{memory.Observation, memory.AssertedInferred, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Product page LCP is about 2.1 s on mobile", "Hero image dominates; measured with Lighthouse in October.",
		[]string{"src/pages/product/[slug].tsx"}, 0.45},
	// From another project, shareable.
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, OtherProject, memory.ReachAnywhere,
		"Idempotency keys on every payment API call", "Retries without a key charged customers twice in billing-api.", nil, 0.85},
	{memory.Failure, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, OtherProject, memory.ReachAnywhere,
		"Webhook handlers must return 2xx within 10 seconds", "Stripe retried slow webhooks and orders were duplicated.", nil, 0.8},
	// More of this project, so that a question meets several related
	// memories, as months of sessions leave them (appended: the ids above
	// keep their numbers).
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Apple Pay and Google Pay come with Stripe Checkout", "Enabled in the Stripe dashboard per payment method; no checkout code changes.",
		[]string{"src/payments/checkout.ts"}, 0.75},
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Refunds are issued from the admin panel through the Stripe API", "A refund writes a refunds row first; the charge.refunded webhook settles it.",
		[]string{"src/admin/refunds.ts", "src/payments/webhook.ts"}, 0.75},
	{memory.Failure, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"The webhook signing secret differs per environment", "STRIPE_WEBHOOK_SECRET in staging is not production's; a copied .env failed every signature check.",
		[]string{".env.example", "src/payments/webhook.ts"}, 0.7},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"The session cookie is HttpOnly, Secure and SameSite=Lax", "Lax so that the return from Stripe Checkout keeps the session.",
		[]string{"src/auth/session.ts"}, 0.8},
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Logging out deletes the session key in Redis", "Other devices keep their own sessions until they expire.",
		[]string{"src/auth/logout.ts"}, 0.7},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Brand is a column of products, not a tag", "Added in migration 0031 with an index; filters read it directly.",
		[]string{"db/migrations/0031_product_brand.sql"}, 0.75},
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"E2E tests run against a seeded database", "pnpm db:seed:e2e before the Playwright run; tests never create products.",
		[]string{"e2e/global-setup.ts"}, 0.75},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Playwright retries are off in CI on purpose", "A flaky test gets fixed, not retried.",
		[]string{"playwright.config.ts"}, 0.7},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"VAT is computed per cart line and rounded half up", "The cart total is the sum of the rounded lines, as the invoices show it.",
		[]string{"src/cart/vat.ts"}, 0.8},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Every price carries its currency code", "ISO 4217 next to the amount in cents; the cart refuses mixed currencies.",
		[]string{"src/cart/money.ts"}, 0.75},
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Migrations are written with node-pg-migrate and run by the release job", "One change per migration; never edit a migration that has run.",
		[]string{"db/migrations"}, 0.8},
	{memory.Observation, memory.AssertedInferred, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"CI builds run on the 4 GB runner", "The pnpm store is cached between runs; the Docker build is the slowest step.",
		[]string{".github/workflows/ci.yml"}, 0.6},
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Reviews need a verified purchase", "The reviews route checks for a delivered order of the product before the insert.",
		[]string{"src/api/reviews/route.ts"}, 0.75},
	{memory.Pattern, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Emails are MJML templates rendered at send time", "Templates live in src/emails; preview them with pnpm email:dev.",
		[]string{"src/emails"}, 0.75},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Shipping status comes from the carrier webhook", "ShipEngine posts tracking events; an order is shipped on the first in_transit.",
		[]string{"src/shipping/webhook.ts"}, 0.75},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Product pages are statically generated and revalidated every 10 minutes", "ISR with revalidate: 600; stock is fetched on the client.",
		[]string{"src/pages/product/[slug].tsx"}, 0.75},
	{memory.Decision, memory.AssertedAssistant, memory.SourceAgent, memory.ScopeProject, Project, memory.ReachHere,
		"Dates are handled with date-fns, not moment", "moment was dropped for bundle size; import functions one by one.",
		[]string{"package.json"}, 0.7},
}

// Questions are ordinary questions a developer asks in this project.
var Questions = []string{
	"How should I add a new payment method to checkout?",
	"The Stripe webhook returns 400 signature verification failed, why?",
	"Where do we store user sessions and how long do they last?",
	"Can you add search by brand to the product search?",
	"The e2e cart test is flaky again, what did we do last time?",
	"How are prices represented in the cart?",
	"Add a migration that indexes products by category",
	"Why is the CI docker build failing with heap out of memory?",
	"How do I validate the body of the new reviews API route?",
	"Send a confirmation email when an order ships",
	"Make the product page load faster on mobile",
	"Which package manager do I use to add date-fns?",
}

// answers are, for each of Questions in order, the seeds written to answer
// it (TestCorpusRecall).
var answers = [][]string{
	{"seed04", "seed22"},           // payment method: Stripe Checkout, Apple Pay
	{"seed10", "seed24"},           // webhook 400: raw body, signing secret
	{"seed06", "seed25", "seed26"}, // sessions: Redis TTL, cookie, logout
	{"seed05", "seed27"},           // search by brand: Postgres FTS, brand column
	{"seed11", "seed28", "seed29"}, // flaky e2e: drawer animation, seeded db, no retries
	{"seed07", "seed30", "seed31"}, // prices: cents, VAT, currency
	{"seed12", "seed32"},           // migration: GIN lock, node-pg-migrate
	{"seed13", "seed33"},           // CI docker heap: NODE_OPTIONS, 4 GB runner
	{"seed14", "seed34"},           // validate reviews: zod, verified purchase
	{"seed09", "seed35", "seed36"}, // shipping email: background job, MJML, carrier webhook
	{"seed19", "seed37", "seed08"}, // product page speed: LCP, ISR, CDN images
	{"seed38"},                     // date-fns (pnpm itself is a standing instruction)
}

// ContentFree are turns that carry no question.
var ContentFree = []string{"ok", "continue", "thanks", "yes"}

// Rich is a long, specific question.
const Rich = "The Stripe webhook in src/payments/webhook.ts intermittently fails signature verification behind " +
	"the proxy and orders get duplicated when Stripe retries; how do we fix the handler and make the retries idempotent?"

// SeedNodes returns the hand-written memories of the corpus.
func SeedNodes() []memory.Node {
	out := make([]memory.Node, 0, len(seeds))
	for i, s := range seeds {
		out = append(out, memory.Node{
			ID: fmt.Sprintf("seed%02d", i), Subkind: s.subkind, Scope: s.scope, ProjectID: s.project,
			Label: s.label, Body: s.body, Confidence: s.conf, AssertedBy: s.asserted, Source: s.source,
			Reach: s.reach, Paths: s.paths, Weight: 1,
		})
	}
	return out
}

// SeedEdges links related seeds so that graph expansion has something to walk.
func SeedEdges() []memory.Edge {
	return []memory.Edge{
		{Src: "seed10", Dst: "seed04", Relation: memory.RelatesTo},   // webhook failure ~ Stripe checkout
		{Src: "seed21", Dst: "seed10", Relation: memory.RelatesTo},   // 10 s rule ~ webhook failure
		{Src: "seed12", Dst: "seed05", Relation: memory.CausedBy},    // migration lock ~ search decision
		{Src: "seed20", Dst: "seed04", Relation: memory.Generalizes}, // idempotency ~ payments
		{Src: "seed23", Dst: "seed04", Relation: memory.RelatesTo},   // refunds ~ Stripe checkout
		{Src: "seed24", Dst: "seed10", Relation: memory.RelatesTo},   // signing secret ~ webhook failure
		{Src: "seed25", Dst: "seed06", Relation: memory.RelatesTo},   // cookie ~ sessions
		{Src: "seed30", Dst: "seed07", Relation: memory.RelatesTo},   // VAT ~ cents
		{Src: "seed36", Dst: "seed09", Relation: memory.RelatesTo},   // carrier webhook ~ order emails
	}
}

var fillerTopics = []string{"inventory", "shipping", "returns", "coupons", "wishlist", "reviews", "analytics",
	"newsletter", "admin", "reports", "tax", "currency", "locale", "accessibility", "sitemap", "seo", "logging",
	"metrics", "alerts", "backups", "queues", "cache", "rate limit", "uploads", "thumbnails", "exports",
	"imports", "webhooks", "oauth", "sso", "permissions", "audit", "gdpr", "cookies", "banners", "carousel",
	"footer", "header", "navigation", "breadcrumbs", "pagination", "filters", "sorting", "variants", "bundles",
	"gift cards", "loyalty", "referrals", "affiliates", "marketplace", "vendors", "warehouses", "pickup",
	"delivery slots", "tracking", "invoices", "refunds", "chargebacks", "fraud", "captcha", "i18n", "dark mode"}

var fillerVerbs = []string{"uses", "caches", "validates", "retries", "logs", "batches", "renders", "queues",
	"indexes", "exports", "migrates", "throttles", "signs", "encrypts", "compresses", "paginates", "memoises"}

var fillerObjects = []string{"the nightly job", "a Redis hash", "the admin table", "a cron worker", "the REST client",
	"the GraphQL resolver", "an S3 bucket", "the feature flag", "a materialised view", "the event bus",
	"a Lambda function", "the edge cache", "a Postgres trigger", "the CSV parser", "the PDF renderer"}

var fillerDetails = []string{"after the March incident", "to cut p95 latency", "because the vendor API rate-limits",
	"so that retries stay safe", "behind a feature flag", "only for EU customers", "for the mobile app", "to keep the bundle small",
	"when the queue backs up", "during the nightly window", "for admins only", "to satisfy the auditors", "until the rewrite lands",
	"as a stopgap", "per the architecture review", "to avoid N+1 queries", "with a five-minute TTL", "using optimistic locking",
	"with exponential backoff", "in a single transaction", "outside the request path", "with structured logs",
	"after profiling showed hot spots", "to support partial refunds", "for multi-currency carts", "with server-side rendering"}

var syllables = []string{"ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "do", "gra", "bel", "tor", "vin", "quo"}

// pseudoWord makes an identifier-like word that is unique to i.
func pseudoWord(r *rand.Rand, i int) string {
	var sb strings.Builder
	for range 2 + r.IntN(2) {
		sb.WriteString(syllables[r.IntN(len(syllables))])
	}
	return fmt.Sprintf("%s%d", sb.String(), i)
}

// ProjectName is the name of the i-th project of a multi-project run
// (bench inject -projects): the corpus' own project first.
func ProjectName(i int) string {
	if i == 0 {
		return Project
	}
	return fmt.Sprintf("%s-%03d", Project, i)
}

// Filler returns n synthetic memories spread over many topics, so that the
// seeds compete with a realistic crowd. Every filler memory is distinct (it
// names its own component). Deterministic by seed.
func Filler(n int, seedValue uint64) []memory.Node {
	r := rand.New(rand.NewPCG(seedValue, 7))
	subkinds := []memory.Subkind{memory.Decision, memory.Pattern, memory.Failure, memory.Observation}
	out := make([]memory.Node, n)
	for i := range out {
		topic := fillerTopics[r.IntN(len(fillerTopics))]
		verb := fillerVerbs[r.IntN(len(fillerVerbs))]
		obj := fillerObjects[r.IntN(len(fillerObjects))]
		detail := fillerDetails[r.IntN(len(fillerDetails))]
		comp := pseudoWord(r, i)
		dir := strings.ReplaceAll(topic, " ", "")
		var label, body string
		switch r.IntN(3) {
		case 0:
			label = fmt.Sprintf("%s in %s %s %s", comp, topic, verb, obj)
			body = fmt.Sprintf("Done %s.", detail)
		case 1:
			label = fmt.Sprintf("The %s code %s %s %s", topic, verb, obj, detail)
			body = fmt.Sprintf("Component %s.", comp)
		default:
			label = fmt.Sprintf("%s: %s %s", comp, verb, obj)
			body = fmt.Sprintf("Part of %s work, %s.", topic, detail)
		}
		out[i] = memory.Node{
			ID:         fmt.Sprintf("fill%06d", i),
			Subkind:    subkinds[r.IntN(len(subkinds))],
			Scope:      memory.ScopeProject,
			ProjectID:  Project,
			Label:      label,
			Body:       body,
			Confidence: 0.35 + 0.6*r.Float64(),
			AssertedBy: memory.AssertedInferred,
			Source:     memory.SourceAgent,
			Reach:      memory.ReachHere,
			Paths:      []string{fmt.Sprintf("src/%s/%s.ts", dir, comp)},
			Weight:     1 + float64(r.IntN(4)),
		}
	}
	return out
}

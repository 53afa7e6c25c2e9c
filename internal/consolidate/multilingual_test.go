package consolidate_test

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestOverlapAnyLanguage: the word overlap is language-independent. Two
// facts that differ in a word replaced (what the user loves: sailing or
// knitting) are apart in Spanish as in English, and two Chinese facts that
// differ in their ending are compared by their character bigrams (not as
// one word each: 0); a fact restated with words added is close in every
// script.
func TestOverlapAnyLanguage(t *testing.T) {
	apart := [][2]string{
		{"El usuario ama navegar.", "El usuario ama tejer."},
		{"The user loves sailing.", "The user loves knitting."},
		{"Der Nutzer geht jeden Montag schwimmen.", "Der Nutzer geht jeden Freitag schwimmen."},
		{"用户喜欢航海。", "用户喜欢编织。"},
		{"ユーザーは毎朝コーヒーを飲む。", "ユーザーは毎朝紅茶を飲む。"},
		{"Пользователь любит парусный спорт.", "Пользователь любит вязание."},
	}
	for _, p := range apart {
		if o := consolidate.Overlap(p[0], p[1]); o >= 0.5 {
			t.Errorf("%q / %q: overlap %.2f, held as near-duplicates", p[0], p[1], o)
		}
	}
	if o := consolidate.Overlap("用户喜欢航海。", "用户喜欢编织。"); o <= 0 {
		t.Errorf("two Chinese facts sharing their start overlap %.2f: not compared at all", o)
	}
	close := [][2]string{
		{"El usuario ama navegar.", "El usuario ama navegar en verano."},
		{"Der Nutzer schwimmt jeden Dienstag.", "Der Nutzer schwimmt jeden Dienstag im See."},
		{"用户喜欢航海。", "用户非常喜欢航海。"},
		{"The user swims every Tuesday morning.", "The user swims every Tuesday morning at the lake."},
	}
	for _, p := range close {
		if o := consolidate.Overlap(p[0], p[1]); o < 0.5 {
			t.Errorf("%q / %q: overlap %.2f, not held", p[0], p[1], o)
		}
	}
	// Among a project's facts, a word many of them share weighs little
	// (the subject, and function words that recur: "por", "la", "cada"):
	// the replaced object stays apart, a restatement with its function
	// words changed is close.
	project := []string{"El usuario vive en Madrid.", "El usuario trabaja como enfermero.", "El usuario tiene dos gatos.",
		"El usuario ama el café.", "El usuario juega al tenis los sábados.", "El usuario pasea por la ciudad.", "El usuario lee cada noche."}
	if o := consolidate.Overlap("El usuario ama navegar.", "El usuario ama tejer.", project...); o >= 0.5 {
		t.Errorf("among the project's facts: overlap %.2f", o)
	}
	if o := consolidate.Overlap("El usuario prefiere té verde por la mañana.", "El usuario prefiere té verde cada mañana.", project...); o < 0.5 {
		t.Errorf("a restatement among the project's facts: overlap %.2f", o)
	}
}

// TestRememberMultilingual: through a pass (no embedder: the words
// decide), "El usuario ama tejer." is stored beside "El usuario ama
// navegar.", and a Chinese fact that only adds a word to a stored one is
// held for review.
func TestRememberMultilingual(t *testing.T) {
	f := newFixture(t, sqliteStore(t), consolidate.WithEmbedder(nil))
	f.seed(memory.Node{Subkind: memory.Preference, Label: "El usuario ama navegar."})
	f.seed(memory.Node{Subkind: memory.Preference, Label: "用户喜欢航海。"})
	f.say("Me encanta tejer. 我非常喜欢航海。", "")
	f.srv.Enqueue(remember("El usuario ama tejer.", "preference"), remember("用户非常喜欢航海。", "preference"), done())
	res := f.run()
	if o := res.Outcome; o.Stored != 1 || o.Held != 1 {
		t.Fatalf("outcome %+v", o)
	}
	if s := f.trailing(1); !strings.Contains(s, "stored [") {
		t.Errorf("the Spanish fact was not stored:\n%s", s)
	}
	if s := f.trailing(2); !strings.Contains(s, "held for review: close to ") || !strings.Contains(s, "用户喜欢航海。") {
		t.Errorf("the Chinese restatement was not held:\n%s", s)
	}
	if texts := f.liveTexts(); texts["El usuario ama tejer."] == "" || texts["用户非常喜欢航海。"] != "" {
		t.Fatalf("live %v", texts)
	}
}

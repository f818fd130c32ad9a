// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package kernelclass sorts CUDA kernel names into categories (attention,
// gemm, communication, ...) and shortens them into readable series names.
// The cupti receiver labels its kernel metrics with both; the graphsignal
// exporter reads the same table, so one name always lands in one category.
package kernelclass // import "github.com/inferprof/inferprof/internal/kernelclass"

import (
	"fmt"
	"regexp"
	"strings"
)

// Categories. The value is what gpu.kernel.category carries.
const (
	CategoryAttentionPrefill = "attention_prefill"
	CategoryAttentionDecode  = "attention_decode"
	CategoryAttention        = "attention" // attention whose phase the name does not tell
	CategoryGEMM             = "gemm"
	CategoryMoE              = "moe"
	CategoryCommunication    = "communication"
	CategoryKVCache          = "kv_cache"
	CategoryNormalization    = "normalization"
	CategoryActivation       = "activation"
	CategoryRoPE             = "rope"
	CategorySampling         = "sampling"
	CategoryQuantization     = "quantization"
	CategoryMemory           = "memory"
	CategoryOther            = "other"
	// CategoryCUDAGraph is a whole CUDA graph launch, in the injection
	// library's graph mode, where the graph's kernels are not seen one by one.
	CategoryCUDAGraph = "cuda_graph"
)

// Rule maps kernel names matching Pattern (a Go regexp, matched against the
// raw name, case-insensitively) to Category.
type Rule struct {
	Category string
	Pattern  string
}

// DefaultRules is the built-in table, tried in order; the first match wins.
// The order matters: specific families (NCCL, MoE, KV-cache writes) come
// before the generic words (gemm, attention) their kernels also contain.
// docs/cupti-receiver.md lists it with examples.
var DefaultRules = []Rule{
	{CategoryCommunication, `nccl|rccl|cross_device_reduce|custom_?all_?reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|quickreduce|deep_?ep|nvshmem|one_?shot_?(all)?reduce|two_?shot`},
	{CategoryMoE, `moe|fused_experts|topk_?gating|topk_?softmax|grouped_topk|align_block_size|expert|shuffle_rows|m_grouped|grouped_gemm`},
	{CategoryKVCache, `reshape_and_cache|concat_and_cache|copy_blocks|swap_blocks|store_kvcache|gather_cache|append_paged_kv|cache_kernel|kv_?cache_?(store|write|copy|quant)|indexer_k_quant`},
	{CategoryAttentionDecode, `paged_?attention|decode_?attention|batchdecode|flash_?decod|splitkv|split_kv|mla_?decode|flashmla|lean_?attention|xqa`},
	{CategoryAttentionPrefill, `batchprefill|singleprefill|prefill|context_attention|varlen_fwd|fmha_?fwd|cudnn.*sdpa`},
	{CategoryAttention, `attention|attn|fmha|flash_?fwd|flash::|sdpa|mha_|merge_attn_states`},
	{CategoryNormalization, `rms_?norm|layer_?norm|group_?norm|batch_?norm|instance_?norm|cudnn::bn_|bn_fw|bn_bw|qk_?norm|norm_kernel`},
	{CategoryRoPE, `rotary|rope|pos_encoding|mrope`},
	{CategoryQuantization, `quant|cvt_fp|fp8_convert|per_token_group|scaled_fp8|to_fp8|fp4_convert`},
	{CategoryGEMM, `gemm|gemv|matmul|sgemm|hgemm|cutlass|cublas|marlin|machete|xmma|nvjet|wgmma|splitkreduce|scaled_mm|_mm_|^(ampere|sm\d+|hopper|volta|turing)_|convolve|conv2d|winograd|implicit_gemm`},
	{CategoryActivation, `act_and_mul|silu|gelu|swiglu|relu|sigmoid|tanh|activation|softplus|mish`},
	{CategorySampling, `sampl|top_?k|top_?p|min_?p|argmax|multinomial|gumbel|penalt|token_bitmask|softmax|logsoftmax|radixsort|bitonicsort`},
	{CategoryMemory, `memcpy|memset|copy_kernel|direct_copy|catarray|fillfunctor|fill_kernel|index_?select|gather|scatter|transpose|embedding`},
}

// Table classifies kernel names. It is safe for concurrent use once built.
type Table struct {
	rules []compiled
}

type compiled struct {
	category string
	re       *regexp.Regexp
}

// New builds a table that tries extra first (user rules override the
// built-in ones) and then DefaultRules.
func New(extra []Rule) (*Table, error) {
	t := &Table{}
	for i, r := range append(append([]Rule(nil), extra...), DefaultRules...) {
		if r.Category == "" {
			return nil, fmt.Errorf("kernel category rule %d: empty category", i)
		}
		re, err := regexp.Compile("(?i)" + r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("kernel category rule %d (%s): %w", i, r.Category, err)
		}
		t.rules = append(t.rules, compiled{category: r.Category, re: re})
	}
	return t, nil
}

// Default is the table with the built-in rules only.
var Default = mustDefault()

func mustDefault() *Table {
	t, err := New(nil)
	if err != nil {
		panic(err) // the built-in table is a constant; a test compiles it
	}
	return t
}

// Classify returns the category of a raw (mangled or demangled) kernel name.
// It runs regexps, so callers cache the answer per distinct name.
func (t *Table) Classify(name string) string {
	for _, r := range t.rules {
		if r.re.MatchString(name) {
			return r.category
		}
	}
	return CategoryOther
}

// MaxShortLen caps a shortened name, to keep series labels small.
const MaxShortLen = 120

// Shorten turns a raw kernel name into a readable series name: the
// qualified function name without return type, template arguments,
// parameters and Triton sequence suffixes, keeping at most the last three
// scope components. Itanium-mangled names (_Z...) are partly demangled.
func Shorten(name string) string {
	var s string
	if strings.HasPrefix(name, "_Z") {
		s = demangleScope(name)
	} else {
		s = shortenDemangled(name)
	}
	if s == "" {
		s = name
	}
	if strings.HasPrefix(s, "triton_") {
		s = trimSeqSuffix(s)
	}
	if parts := strings.Split(s, "::"); len(parts) > 3 {
		s = strings.Join(parts[len(parts)-3:], "::")
	}
	if len(s) > MaxShortLen {
		s = s[:MaxShortLen]
	}
	return s
}

// shortenDemangled handles names such as
// "void at::native::(anonymous namespace)::foo_kernel<float, 4>(int, float*)".
func shortenDemangled(name string) string {
	name = strings.ReplaceAll(name, "(anonymous namespace)::", "")
	var b strings.Builder
	depth := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '<':
			depth++
		case c == '>':
			if depth > 0 {
				depth--
			}
		case depth > 0:
		case c == '(':
			i = len(name) // parameters: done
		default:
			b.WriteByte(c)
		}
	}
	s := strings.TrimSpace(b.String())
	// Drop a return type such as "void" or "__global__ void".
	if j := strings.LastIndexByte(s, ' '); j >= 0 {
		s = s[j+1:]
	}
	return s
}

// demangleScope reads the scope chain of an Itanium-mangled name:
// "_ZN5flash13flash_fwd_kernelI..." gives "flash::flash_fwd_kernel".
func demangleScope(name string) string {
	p := name[2:]
	nested := strings.HasPrefix(p, "N")
	if nested {
		p = p[1:]
	}
	var parts []string
	for len(p) > 0 {
		switch {
		case p[0] == 'r' || p[0] == 'V' || p[0] == 'K' || p[0] == 'L':
			p = p[1:]
			continue
		case strings.HasPrefix(p, "St"):
			parts = append(parts, "std")
			p = p[2:]
			continue
		}
		if p[0] < '0' || p[0] > '9' {
			break
		}
		n, j := 0, 0
		for j < len(p) && p[j] >= '0' && p[j] <= '9' && n < 1<<16 {
			n = n*10 + int(p[j]-'0')
			j++
		}
		if n == 0 || j+n > len(p) {
			break
		}
		id := p[j : j+n]
		if strings.HasPrefix(id, "_GLOBAL__N") {
			id = "" // anonymous namespace
		}
		if id != "" {
			parts = append(parts, id)
		}
		p = p[j+n:]
		if !nested {
			break
		}
	}
	return strings.Join(parts, "::")
}

func trimSeqSuffix(s string) string {
	j := len(s)
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	if j < len(s) && j > 0 && s[j-1] == '_' {
		return s[:j-1]
	}
	return s
}
